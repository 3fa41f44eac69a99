//! Serve one raw file over NBD on a unix socket: the server with no array
//! behind it, so benchmarks can tell the protocol's cost from the array's.
//!
//!   cargo run --release -p mosaic-nbd --example serve_file -- FILE SOCKET [WORKERS [pool]]
//!
//! `pool` serves through the worker pool rather than inline on each
//! connection's reader (the path `mosaic serve` takes).  With
//! `SERVE_FILE_TLS=DIR` set, clients must start TLS with the certificates
//! in DIR (`server-cert.pem`, `server-key.pem`), as nbdkit's
//! `--tls=require --tls-certificates=DIR`; with `SERVE_FILE_TLS_PSK=FILE`,
//! with the pre-shared keys in FILE, as nbdkit's `--tls-psk=FILE`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use mosaic_nbd::{Export, Listener, ServerConfig};

struct FileExport {
    f: File,
    size: u64,
    inline: bool,
}

impl Export for FileExport {
    fn size(&self) -> u64 {
        self.size
    }
    fn block_size(&self) -> u64 {
        4096
    }
    fn preferred_block(&self) -> u64 {
        4096
    }
    /// Meant for files in the page cache (/dev/shm): a pread or pwrite takes
    /// microseconds, less than handing the request to a worker.
    fn serve_inline(&self) -> bool {
        self.inline
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> io::Result<()> {
        self.f.read_exact_at(buf, off)
    }
    fn write(&self, off: u64, data: &[u8]) -> io::Result<()> {
        self.f.write_all_at(data, off)
    }
    fn flush(&self) -> io::Result<()> {
        self.f.sync_data()
    }
    fn trim(&self, _off: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: serve_file FILE SOCKET [WORKERS [pool]]");
        std::process::exit(2);
    }
    let f = OpenOptions::new().read(true).write(true).open(&args[1])?;
    let size = f.metadata()?.len() / 4096 * 4096;
    let workers = args.get(3).and_then(|w| w.parse().ok()).unwrap_or(4);
    let inline = args.get(4).map(String::as_str) != Some("pool");
    let stop = mosaic_nbd::signals::stop_on_signals()?;
    let l = Listener::bind_unix(std::path::Path::new(&args[2]))?;
    let tls = match (std::env::var_os("SERVE_FILE_TLS"), std::env::var_os("SERVE_FILE_TLS_PSK")) {
        (Some(dir), _) => Some(mosaic_nbd::Tls::load(dir.as_ref(), mosaic_nbd::TlsMode::Require, false).map_err(io::Error::other)?),
        (None, Some(keys)) => Some(mosaic_nbd::Tls::load_psk(keys.as_ref(), mosaic_nbd::TlsMode::Require).map_err(io::Error::other)?),
        (None, None) => None,
    };
    let cfg = ServerConfig { workers, log: false, tls, ..ServerConfig::default() };
    eprintln!("serve_file: listening on {}", l.uri(""));
    mosaic_nbd::serve(&l, Arc::new(FileExport { f, size, inline }), &cfg, stop)?;
    Ok(())
}
