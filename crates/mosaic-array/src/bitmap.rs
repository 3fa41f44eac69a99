//! The write-intent bitmap (md's internal bitmap): what an array without
//! a journal resyncs after a crash.
//!
//! The stripes are cut into regions of `chunk` stripes, one bit each (the
//! blocks on disk: [`mosaic_format::bitmap`]).  Every journaled write
//! phase goes through the array's journal hook; without a journal the hook
//! is this bitmap, which
//!
//! 1. counts the write in flight in each region its device writes touch;
//! 2. if a region's bit is not set yet, sets it and writes and flushes the
//!    blocks holding it on every member before any device write goes out;
//! 3. when the writes finish, notes the regions touched.
//!
//! ```text
//!   write ──> regions of its device writes ──> bit set? ── yes ──> member writes
//!                                                 │ no
//!                                                 └─> set it, write its block on
//!                                                     every member, flush ──┘
//!   flush ──> members flushed ──> sweep (at most once an epoch): a set bit
//!             whose region had no write since the last sweep and none in
//!             flight is cleared (written, not flushed: clearing is lazy)
//! ```
//!
//! So a region whose code may disagree with its data after a crash always
//! has its bit set on every member in service, and the resync after an
//! unclean shutdown ([`crate::Array::resync`]) scrubs only those regions.
//! Bits are never cleared while a member is out of service or the array is
//! unsynced: they then also say what a member that comes back missed.
//!
//! The bitmap's writes go to the members directly, outside the executor's
//! counters (as the superblocks' do), so the device operations a policy
//! plans are the same with and without it.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use uuid::Uuid;

use mosaic_core::{Geometry, MemberState};
use mosaic_dev::Member;
use mosaic_exec::DevWrite;
use mosaic_format::bitmap::{self as fmt, BlockRead, BITS_BYTES, BITS_PER_BLOCK, BLOCK};

use crate::array::Array;
use crate::superblock::{BitmapInfo, DATA_OFFSET};
use crate::ArrayError;

/// Where the bitmap starts on every member: the end of the header.
pub const BITMAP_OFFSET: u64 = DATA_OFFSET - fmt::AREA;
const _: () = assert!(mosaic_format::label::LABEL_AREA <= BITMAP_OFFSET);

/// md's default: a bit for every 64 MiB of each member's data.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 20;

/// Arrays at least this large get a bitmap by default, as mdadm gives
/// arrays of 100 GB and more.
pub const DEFAULT_FROM_BYTES: u64 = 100_000_000_000;

/// The stripes a bit covers for `chunk_bytes` of each member's data,
/// widened until the bitmap fits its area.
pub fn chunk_for(geo: &Geometry, chunk_bytes: u64) -> u64 {
    (chunk_bytes / geo.unit).max(1).max(geo.stripes.div_ceil(fmt::MAX_BITS))
}

/// One array's write-intent bitmap in memory.
pub struct WriteIntent {
    uuid: Uuid,
    geo: Geometry,
    chunk: u64,
    /// Each region's bit as it is (or is about to be) on the members.
    set: Vec<AtomicBool>,
    /// Writes in flight in each region.
    inflight: Vec<AtomicU32>,
    /// A write finished in the region since the last sweep.
    touched: Vec<AtomicBool>,
    /// A write in the region failed on a member: its bit stays set until
    /// a clean close with every member in service (the member is
    /// recorded failed only after the write's intent is dropped, and
    /// what it missed must stay marked for a re-add: see
    /// [`Array::replace_with`]).
    pinned: Vec<AtomicBool>,
    /// Held while bits change and blocks are written: one writer of the
    /// blocks at a time, and a sweep never races a bit being set.
    io: Mutex<Instant>,
    /// Members re-added in this open ([`Array::replace_with`]): their
    /// rebuild passes over the regions whose bit is clear.
    readded: Mutex<Vec<usize>>,
}

/// Held while a write phase's device writes run ([`WriteIntent::start`]).
pub struct Intent<'a> {
    wi: &'a WriteIntent,
    regions: Vec<u64>,
}

impl Drop for Intent<'_> {
    fn drop(&mut self) {
        for &r in &self.regions {
            self.wi.touched[r as usize].store(true, SeqCst);
            self.wi.inflight[r as usize].fetch_sub(1, SeqCst);
        }
    }
}

impl WriteIntent {
    /// A bitmap of `info.chunk` stripes a bit over `geo`, every bit `set`.
    pub fn new(uuid: Uuid, geo: &Geometry, info: BitmapInfo, set: bool) -> WriteIntent {
        let bits = geo.stripes.div_ceil(info.chunk) as usize;
        WriteIntent {
            uuid,
            geo: geo.clone(),
            chunk: info.chunk,
            set: (0..bits).map(|_| AtomicBool::new(set)).collect(),
            inflight: (0..bits).map(|_| AtomicU32::new(0)).collect(),
            touched: (0..bits).map(|_| AtomicBool::new(false)).collect(),
            pinned: (0..bits).map(|_| AtomicBool::new(false)).collect(),
            io: Mutex::new(Instant::now()),
            readded: Mutex::new(Vec::new()),
        }
    }

    /// Record whether member `idx` came back as the device that left its
    /// slot (md's re-add), or is new.
    pub fn set_readd(&self, idx: usize, readd: bool) {
        let mut r = self.readded.lock();
        r.retain(|&i| i != idx);
        if readd {
            r.push(idx);
        }
    }

    /// Whether member `idx` is being re-added.
    pub fn readd(&self, idx: usize) -> bool {
        self.readded.lock().contains(&idx)
    }

    /// Stripes a bit covers.
    pub fn chunk(&self) -> u64 {
        self.chunk
    }

    /// Regions (bits).
    pub fn regions(&self) -> u64 {
        self.set.len() as u64
    }

    /// Regions whose bit is set now.
    pub fn dirty(&self) -> u64 {
        self.set.iter().filter(|b| b.load(SeqCst)).count() as u64
    }

    /// The stripes of the regions whose bit is set now, as ranges.
    pub fn dirty_stripes(&self) -> Vec<std::ops::Range<u64>> {
        let mut out: Vec<std::ops::Range<u64>> = Vec::new();
        for (r, b) in self.set.iter().enumerate() {
            if !b.load(SeqCst) {
                continue;
            }
            let (lo, hi) = (r as u64 * self.chunk, ((r as u64 + 1) * self.chunk).min(self.geo.stripes));
            match out.last_mut() {
                Some(last) if last.end == lo => last.end = hi,
                _ => out.push(lo..hi),
            }
        }
        out
    }

    /// The bitmap the members in service hold: for each block, the union
    /// of the whole copies on `members` (a torn or blank copy says nothing
    /// when another member has a whole one); a block no member holds
    /// whole reads as every bit set.  Returns the bitmap and what could
    /// not be read, for a warning.
    pub fn load(uuid: Uuid, geo: &Geometry, info: BitmapInfo, members: &[Arc<dyn Member>]) -> (WriteIntent, Vec<String>) {
        let wi = WriteIntent::new(uuid, geo, info, false);
        let mut warnings = Vec::new();
        let mut buf = vec![0u8; BLOCK];
        for b in 0..fmt::blocks_for(wi.regions()) {
            let mut union: Option<[u8; BITS_BYTES]> = None;
            let mut why = Vec::new();
            for m in members {
                let read = match m.read_at(&mut buf, BITMAP_OFFSET + (b * BLOCK) as u64) {
                    Ok(()) => fmt::decode_block(&buf, uuid, info.chunk, b),
                    Err(e) => BlockRead::Unusable(format!("read: {e}")),
                };
                match read {
                    BlockRead::Bits(bits) => {
                        let u = union.get_or_insert([0; BITS_BYTES]);
                        u.iter_mut().zip(bits.iter()).for_each(|(a, b)| *a |= b);
                    }
                    BlockRead::Unusable(w) => why.push(format!("{}: {w}", m.describe())),
                }
            }
            let bits = union.unwrap_or_else(|| {
                warnings.push(format!("write-intent bitmap block {b} is whole on no member ({}): its regions are resynced whole", why.join("; ")));
                [0xff; BITS_BYTES]
            });
            for (j, bit) in wi.block(b) {
                bit.store(bits[j / 8] >> (j % 8) & 1 == 1, SeqCst);
            }
        }
        (wi, warnings)
    }

    /// The regions `writes` touch, sorted, once each.
    fn regions_of(&self, writes: &[DevWrite<'_>]) -> Vec<u64> {
        let mut regions = Vec::with_capacity(writes.len());
        let last = (self.set.len() as u64).saturating_sub(1);
        for (op, _) in writes {
            let (a, b) = self.geo.stripes_at(op.member, op.offset, op.len);
            regions.extend((a / self.chunk).min(last)..=(b / self.chunk).min(last));
        }
        regions.sort_unstable();
        regions.dedup();
        regions
    }

    /// Keep the regions of `writes`, some of which failed, marked (their
    /// intent is still held, so their bits are set).
    pub fn pin(&self, writes: &[DevWrite<'_>]) {
        for r in self.regions_of(writes) {
            self.pinned[r as usize].store(true, SeqCst);
        }
    }

    /// Whether stripe `stripe`'s region is marked now.
    pub fn marks(&self, stripe: u64) -> bool {
        self.set.get((stripe / self.chunk) as usize).is_none_or(|b| b.load(SeqCst))
    }

    /// The regions `writes` touch, counted in flight; bits not yet set are
    /// set and made durable on every member in service first.
    pub fn start(&self, arr: &Array, writes: &[DevWrite<'_>]) -> Result<Intent<'_>, ArrayError> {
        let intent = Intent { wi: self, regions: self.regions_of(writes) };
        // In flight before the bit is looked at, and a sweep clears a bit
        // before it looks at the count (both SeqCst): one of the two sees
        // the other.
        intent.regions.iter().for_each(|&r| {
            self.inflight[r as usize].fetch_add(1, SeqCst);
        });
        if intent.regions.iter().all(|&r| self.set[r as usize].load(SeqCst)) {
            return Ok(intent);
        }
        let _io = self.io.lock();
        let mut blocks: Vec<usize> = Vec::new();
        for &r in &intent.regions {
            if !self.set[r as usize].swap(true, SeqCst) {
                blocks.push((r / BITS_PER_BLOCK) as usize);
            }
        }
        blocks.dedup();
        self.write_blocks(arr, &blocks, true)?;
        Ok(intent)
    }

    /// Clear the bits of regions quiet since the last sweep, at most once
    /// an `every`; the caller has just flushed the members, and no bit is
    /// cleared while `hold` (a member out, the array unsynced).
    pub fn sweep(&self, arr: &Array, every: Duration, hold: bool) {
        let mut last = self.io.lock();
        if hold || last.elapsed() < every {
            return;
        }
        *last = Instant::now();
        let mut blocks = Vec::new();
        for (r, bit) in self.set.iter().enumerate() {
            if !bit.load(SeqCst) || self.touched[r].swap(false, SeqCst) || self.pinned[r].load(SeqCst) {
                continue;
            }
            bit.store(false, SeqCst);
            if self.inflight[r].load(SeqCst) > 0 || self.touched[r].load(SeqCst) {
                bit.store(true, SeqCst);
                continue;
            }
            blocks.push(r / BITS_PER_BLOCK as usize);
        }
        blocks.dedup();
        // Best effort: a clear that does not land leaves a bit set.
        let _ = self.write_blocks(arr, &blocks, false);
    }

    /// A resync made region `r`'s stripes agree and flushed them: clear
    /// its bit, unless a write is in flight there or came since the open
    /// (it may have landed on a stripe before the resync reached it, or
    /// not be flushed yet: kept for the next resync), or one failed.
    pub fn clear_resynced(&self, arr: &Array, r: u64) {
        let r = r as usize;
        let _io = self.io.lock();
        if r >= self.set.len() || self.pinned[r].load(SeqCst) || self.touched[r].load(SeqCst) || !self.set[r].load(SeqCst) {
            return;
        }
        self.set[r].store(false, SeqCst);
        if self.inflight[r].load(SeqCst) > 0 || self.touched[r].load(SeqCst) {
            self.set[r].store(true, SeqCst);
            return;
        }
        // Best effort: a clear that does not land leaves the bit set.
        let _ = self.write_blocks(arr, &[r / BITS_PER_BLOCK as usize], false);
    }

    /// Clear every bit (a clean close: nothing in flight, all flushed).
    pub fn clear_all(&self, arr: &Array) -> Result<(), ArrayError> {
        let _io = self.io.lock();
        let mut blocks = Vec::new();
        for (r, bit) in self.set.iter().enumerate() {
            self.pinned[r].store(false, SeqCst);
            if bit.swap(false, SeqCst) {
                blocks.push(r / BITS_PER_BLOCK as usize);
            }
        }
        blocks.dedup();
        self.write_blocks(arr, &blocks, true)
    }

    /// Write every block to `m` (a member that takes a place in the array).
    pub fn write_all_to(&self, m: &dyn Member) -> std::io::Result<()> {
        let _io = self.io.lock();
        for b in 0..fmt::blocks_for(self.regions()) {
            m.write_at(&self.encode(b), BITMAP_OFFSET + (b * BLOCK) as u64)?;
        }
        m.flush()
    }

    /// The bits block `b` holds, each with its place in the block.
    fn block(&self, b: usize) -> impl Iterator<Item = (usize, &AtomicBool)> {
        let per = BITS_PER_BLOCK as usize;
        self.set.iter().skip(b * per).take(per).enumerate()
    }

    /// Block `b` as the bits are now.
    fn encode(&self, b: usize) -> Vec<u8> {
        let mut bits = [0u8; BITS_BYTES];
        for (j, bit) in self.block(b) {
            bits[j / 8] |= (bit.load(SeqCst) as u8) << (j % 8);
        }
        fmt::encode_block(self.uuid, self.chunk, b, &bits)
    }

    /// Write `blocks` to every member in service (and being rebuilt),
    /// flushed with `durable`; a member that fails is failed, as a device
    /// write's error fails it.  The caller holds `io`.
    fn write_blocks(&self, arr: &Array, blocks: &[usize], durable: bool) -> Result<(), ArrayError> {
        if blocks.is_empty() {
            return Ok(());
        }
        let encoded: Vec<(u64, Vec<u8>)> = blocks.iter().map(|&b| (BITMAP_OFFSET + (b * BLOCK) as u64, self.encode(b))).collect();
        let states = arr.health().states;
        let mut wrote = 0;
        for (i, st) in states.iter().enumerate() {
            let Some(m) = arr.member(i).filter(|_| !matches!(st, MemberState::Failed)) else { continue };
            let res = encoded.iter().try_for_each(|(off, b)| m.write_at(b, *off)).and_then(|_| if durable { m.flush() } else { Ok(()) });
            match res {
                Ok(()) => wrote += 1,
                Err(e) => arr.fail_on_error(i, &std::io::Error::new(e.kind(), format!("writing the write-intent bitmap: {e}"))),
            }
        }
        if wrote == 0 {
            return Err(ArrayError::Io("write-intent bitmap: no member took it".into()));
        }
        Ok(())
    }
}

impl Array {
    /// The write-intent bitmap, when the array has one.
    pub(crate) fn bitmap(&self) -> Option<Arc<WriteIntent>> {
        self.bitmap.read().clone()
    }

    /// No bit may be cleared: a member is out of service (the bits say
    /// what it missed) or the array is unsynced (they say what to resync).
    pub(crate) fn bitmap_held(&self) -> bool {
        self.unsynced.load(SeqCst) || self.health().states.iter().any(|s| !matches!(s, MemberState::Active))
    }

    /// At open: the bitmap the members in service hold.
    pub(crate) fn load_bitmap(&mut self) {
        let sb = self.superblock();
        let Some(info) = sb.bitmap else { return };
        let h = self.health();
        let members: Vec<Arc<dyn Member>> = (0..h.states.len()).filter(|&i| matches!(h.states[i], MemberState::Active)).filter_map(|i| self.member(i)).collect();
        let (wi, warnings) = WriteIntent::load(sb.array_uuid, &self.geometry(), info, &members);
        self.open_warnings.extend(warnings);
        *self.bitmap.get_mut() = Some(Arc::new(wi));
    }

    /// Give the array a write-intent bitmap of `chunk_bytes` of each
    /// member's data a bit (mdadm `--grow --bitmap=internal`), or take it
    /// away (`None`; `--bitmap=none`).  Writes wait meanwhile.  An array
    /// with a journal needs none (the journal closes the write hole), and
    /// a grow in progress refuses it (the grow's copy may take the bytes).
    pub fn set_bitmap(&self, chunk_bytes: Option<u64>) -> Result<(), ArrayError> {
        self.check_writable()?;
        let _g = self.gate.write();
        let sb = self.superblock();
        let Some(bytes) = chunk_bytes else {
            if sb.bitmap.is_some() {
                self.write_superblocks(|s| s.bitmap = None)?;
            }
            *self.bitmap.write() = None;
            return Ok(());
        };
        if sb.journal.is_some() {
            return Err(ArrayError::Usage("the array has a write-ahead journal, which closes the write hole itself: it takes no write-intent bitmap".into()));
        }
        if sb.reshape.is_some() {
            return Err(ArrayError::Usage("a grow is in progress: add the write-intent bitmap once it ends (mosaic grow -a ARRAY)".into()));
        }
        if bytes < self.geometry().block {
            return Err(ArrayError::Usage(format!("a bitmap chunk of {bytes} bytes is smaller than a block ({} bytes)", self.geometry().block)));
        }
        let geo = self.geometry();
        let info = BitmapInfo { chunk: chunk_for(&geo, bytes) };
        if sb.bitmap == Some(info) {
            return Ok(());
        }
        // Unsynced: every region may need the resync until it has run; a
        // member out may have missed writes anywhere.
        let wi = WriteIntent::new(sb.array_uuid, &geo, info, self.bitmap_held());
        let h = self.health();
        for i in (0..geo.members).filter(|&i| !matches!(h.states[i], MemberState::Failed)) {
            if let Some(m) = self.member(i) {
                wi.write_all_to(m.as_ref()).map_err(|e| ArrayError::Io(format!("{}: writing the write-intent bitmap: {e}", m.describe())))?;
            }
        }
        // The blocks are on the members before the superblocks name them.
        self.write_superblocks(|s| s.bitmap = Some(info))?;
        *self.bitmap.write() = Some(Arc::new(wi));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep never clears the bit of a region with a write in flight,
    /// nor of one written since the last sweep.
    #[test]
    fn a_sweep_keeps_the_bits_of_writes_in_flight_and_just_done() {
        let mems: Vec<(Arc<dyn Member>, String)> = (0..4).map(|i| (Arc::new(mosaic_dev::MemMember::new(format!("m{i}"), DATA_OFFSET + 64 * 4096)) as Arc<dyn Member>, format!("m{i}"))).collect();
        let o = crate::CreateOptions { level: "raid5".parse().unwrap(), members: Some(4), member_size: None, unit: 4096, block: 4096, force: true, assume_clean: true };
        let arr = Array::create_on(mems, &o, true).unwrap();
        arr.set_bitmap(Some(4 * 4096)).unwrap();
        let b = arr.bitmap().unwrap();
        let bytes = [7u8; 4096];
        let parts: [&[u8]; 1] = [&bytes];
        // Member 1's unit of stripe 9: region 2.
        let op = mosaic_core::DevOp { member: 1, offset: 9 * 4096, len: 4096, role: mosaic_core::Role::Data, col: 0 };
        let held = b.start(&arr, &[(op, &parts[..])]).unwrap();
        assert_eq!((b.dirty(), b.set[2].load(SeqCst)), (1, true));
        b.sweep(&arr, Duration::ZERO, false);
        assert_eq!(b.dirty(), 1, "in flight");
        drop(held);
        b.sweep(&arr, Duration::ZERO, false);
        assert_eq!(b.dirty(), 1, "written since the last sweep");
        b.sweep(&arr, Duration::ZERO, true);
        assert_eq!(b.dirty(), 1, "held");
        b.sweep(&arr, Duration::from_secs(3600), false);
        assert_eq!(b.dirty(), 1, "not an epoch since the last sweep");
        b.sweep(&arr, Duration::ZERO, false);
        assert_eq!(b.dirty(), 0);
        assert_eq!(b.dirty_stripes(), vec![]);
        // A write that failed on a member: kept until a clean close.
        let held = b.start(&arr, &[(op, &parts[..])]).unwrap();
        b.pin(&[(op, &parts[..])]);
        drop(held);
        for _ in 0..3 {
            b.sweep(&arr, Duration::ZERO, false);
        }
        assert_eq!(b.dirty_stripes(), vec![8..12], "pinned");
        b.clear_all(&arr).unwrap();
        assert_eq!(b.dirty(), 0);
    }

    #[test]
    fn a_chunk_widens_until_the_bitmap_fits() {
        let g = Geometry::new("raid5".parse().unwrap(), 5, 64 << 10, 4096, 1 << 40).unwrap();
        assert_eq!(chunk_for(&g, DEFAULT_CHUNK_BYTES), 1024, "64 MiB of 64 KiB units");
        assert_eq!(chunk_for(&g, 4096), g.stripes.div_ceil(fmt::MAX_BITS), "a stripe a bit would not fit");
        let small = Geometry::new("raid5".parse().unwrap(), 5, 64 << 10, 4096, 1 << 30).unwrap();
        assert_eq!(chunk_for(&small, 4096), 1, "smaller than a unit: a stripe a bit");
        let huge = Geometry::new("raid5".parse().unwrap(), 5, 4096, 4096, 1 << 46).unwrap();
        let c = chunk_for(&huge, 4096);
        assert!(huge.stripes.div_ceil(c) <= fmt::MAX_BITS && huge.stripes.div_ceil(c - 1) > fmt::MAX_BITS, "{c}");
    }
}
