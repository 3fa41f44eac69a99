//! mosaic-nbd: a Network Block Device server (fixed newstyle handshake,
//! simple or structured replies, extended headers, the `base:allocation`
//! metadata context)
//! generic over the [`Export`] trait.  Protocol only: the
//! adapter for mosaic arrays lives in the `mosaic serve` command.
//!
//! ```text
//!   Listener (TCP / unix, bound or passed: activation) ─▶ server::serve ── accept loop, stop flag
//!        │ one thread per connection
//!        ▼
//!   handshake ── options: GO, INFO, LIST, EXPORT_NAME, ABORT,
//!        │        STRUCTURED_REPLY, EXTENDED_HEADERS,
//!        │        LIST/SET_META_CONTEXT ─▶ Session
//!        │        STARTTLS ─▶ tls: the stream becomes Stream::Tls
//!        ▼
//!   conn::transmission ── reader: parse_request_as + check
//!        │                 worker pool (or the reader, if Export::serve_inline):
//!        │                   Export::{read, write, flush, trim, write_zeroes,
//!        │                            cache, extents (BLOCK_STATUS)}
//!        ▼                 replier: simple replies, structured or extended chunks,
//!                          queued and sent in batches
//!   DISC / EOF / stop ── in-flight requests drained, socket closed
//! ```

pub mod activation;
mod bufs;
pub mod conn;
pub mod export;
pub mod handshake;
mod pool;
pub mod proto;
pub mod psk;
pub mod request;
pub mod server;
pub mod signals;
pub mod stream;
pub mod tls;

pub use export::{Export, Extent, MemExport};
pub use handshake::{ExportInfo, Session};
pub use request::{check, parse_request, Command, Limits, ParseError, Request};
pub use server::{export_info, serve, ServeStats, ServerConfig};
pub use stream::{Listener, Stream};
pub use tls::{Tls, TlsMode};
