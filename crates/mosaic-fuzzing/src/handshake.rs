use std::io::{Cursor, Read, Write};

use mosaic_nbd::handshake::{self as nbd, refuse, Outcome, TlsStage};
use mosaic_nbd::proto::REPLY_MAGIC;
use mosaic_nbd::ExportInfo;

/// A client's bytes to read, the server's bytes written.
pub(crate) struct Duplex<'a> {
    pub(crate) input: Cursor<&'a [u8]>,
    pub(crate) output: Vec<u8>,
}

impl Read for Duplex<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Duplex<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of the option replies at the start of `b`.
fn replies(mut b: &[u8]) -> usize {
    let mut n = 0;
    while b.len() >= 20 && b[..8] == REPLY_MAGIC.to_be_bytes() {
        let len = 20 + u32::from_be_bytes(b[16..20].try_into().unwrap()) as usize;
        assert!(b.len() >= len, "a reply cut short");
        n += len;
        b = &b[len..];
    }
    n
}

/// Fuzz the server side of the NBD handshake with whatever a client may
/// send: never panic, and everything the server sends after its greeting
/// is a sequence of well-formed option replies, ended (when transmission
/// begins through NBD_OPT_EXPORT_NAME) by the export's size and flags.
/// The first byte picks the refusal or the handshake, and the server's
/// TLS (none, offered, required); after an acknowledged STARTTLS the rest
/// of the input is taken as the decrypted stream.  A server that requires
/// TLS never reaches transmission in plain text, and a secured stream
/// never acknowledges STARTTLS again.
pub fn handshake(data: &[u8]) {
    let (first, client) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
    let e = ExportInfo {
        name: "fuzz".into(),
        description: "a fuzzed export".into(),
        size: 1 << 30,
        tflags: 1,
        min_block: 512,
        pref_block: 4096,
        max_block: 32 << 20,
    };
    let mut s = Duplex { input: Cursor::new(client), output: Vec::new() };
    let stage = [TlsStage::Off, TlsStage::Offered, TlsStage::Required, TlsStage::Off][(first >> 1 & 3) as usize];
    let mut outcome = if first & 1 == 0 { nbd::handshake_tls(&mut s, &e, stage).ok() } else { refuse(&mut s, "full").ok().map(|_| Outcome::Aborted) };
    let mut secured = false;
    if let Some(Outcome::StartTls { no_zeroes }) = outcome {
        assert!(stage != TlsStage::Off, "STARTTLS acknowledged by a server without TLS");
        secured = true;
        outcome = nbd::after_tls(&mut s, &e, no_zeroes).ok();
        assert!(!matches!(outcome, Some(Outcome::StartTls { .. })), "a second STARTTLS acknowledged");
    }
    if stage == TlsStage::Required && !secured {
        assert!(!matches!(outcome, Some(Outcome::Transmission(_))), "transmission in plain text on a server that requires TLS");
    }
    assert!(s.output.len() >= 18, "the greeting always goes out");
    let rest = &s.output[18..];
    let tail = rest.len() - replies(rest);
    // Transmission through NBD_OPT_EXPORT_NAME ends with size and flags
    // (and 124 zero bytes unless the client asked for none).
    let transmission = matches!(outcome, Some(Outcome::Transmission(_)));
    assert!(tail == 0 || (transmission && (tail == 10 || tail == 134)), "{tail} stray bytes after the replies");
    // BLOCK_STATUS is only ever allowed on top of structured replies.
    if let Some(Outcome::Transmission(session)) = outcome {
        assert!(session.structured || !session.base_allocation, "a meta context without structured replies");
    }
}
