use mosaic_trace::{from_reader, Format, TraceError, TraceOptions};

/// Fuzz the trace readers (format detection, every text format,
/// decompression): never panic, and what they give keeps the promises of
/// `mosaic_trace::Request` (a length that is never 0, an end that never
/// overflows) and of `TraceError::Parse` (a line number inside the input).
/// The first byte chooses the format (or detection) and whether malformed
/// lines are skipped; the rest is the trace.
pub fn trace(data: &[u8]) {
    let (first, text) = data.split_first().map_or((0, data), |(f, r)| (*f, r));
    let format = Format::ALL.get((first & 0x0f) as usize).copied();
    let opts = TraceOptions { format, skip_bad: first & 0x80 != 0, ..Default::default() };
    let compressed = text.starts_with(&[0x1f, 0x8b]) || text.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    let lines = text.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let Ok(reader) = from_reader("fuzz", std::io::Cursor::new(text.to_vec()), &opts) else { return };
    for r in reader.take(4096) {
        match r {
            Ok(q) => {
                assert!(q.len > 0, "a request of 0 bytes: {q:?}");
                assert!(q.offset.checked_add(q.len).is_some(), "a request whose end overflows: {q:?}");
            }
            Err(TraceError::Parse { line, .. }) => {
                assert!(line >= 1, "line numbers start at 1");
                assert!(compressed || line <= lines, "line {line} of an input of {lines} lines");
            }
            Err(_) => {}
        }
    }
}
