//! What the nested kinds (the tier, the remapped array) share: an inner
//! array as an executor member from an offset on, the client's side of a
//! request, and the label (`mosaic_format::label`) in the first bytes of
//! an inner array's logical space.
//!
//! ```text
//!   inner array logical space:  [ label area | reserved ... | base: the outer policy's offset 0 ...
//!   Shifted { inner, base }: the policy's member offset o = inner offset base + o
//! ```

use mosaic_array::nested::ArrayMember;
use mosaic_array::Array;
use mosaic_dev::Member;
use mosaic_exec::Client;
use mosaic_format::label::{self, Label, LabelError, LABEL_AREA};

use crate::{Result, VolumeError};

/// An inner array as member of the tier: its logical bytes from `base`.
pub(crate) struct Shifted {
    pub(crate) inner: ArrayMember,
    pub(crate) base: u64,
}

impl Member for Shifted {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn size(&self) -> u64 {
        self.inner.size().saturating_sub(self.base)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset + self.base)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset + self.base)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

// ------------------------------------------------------------------ volume

/// The client's side of a request.
pub(crate) enum Data<'a> {
    In(&'a [u8]),
    Out(&'a mut [u8]),
}

impl Data<'_> {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Data::In(d) => d.len() as u64,
            Data::Out(b) => b.len() as u64,
        }
    }
    pub(crate) fn client(&mut self) -> Client<'_> {
        match self {
            Data::In(d) => Client::In(d),
            Data::Out(b) => Client::Out(b),
        }
    }
}

/// The label (`mosaic_format::label`) at the start of `arr`'s logical
/// space, if it carries one.
pub(crate) fn read_label(arr: &Array) -> Result<std::result::Result<Label, LabelError>> {
    if arr.capacity() < LABEL_AREA {
        return Ok(Err(LabelError::None));
    }
    let mut head = vec![0u8; LABEL_AREA as usize];
    arr.read(0, &mut head)?;
    let r = label::read_label(LABEL_AREA, &mut |buf, off| {
        let src = usize::try_from(off).ok().and_then(|o| head.get(o..o.checked_add(buf.len())?));
        buf.copy_from_slice(src.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?);
        Ok(())
    });
    Ok(r.unwrap_or_else(|e| Err(LabelError::Corrupt(e.to_string()))))
}

/// Write `l` into its slot on `arr` and make it durable.
pub(crate) fn write_label(arr: &Array, l: &Label) -> Result<()> {
    let b = l.encode().map_err(|e| VolumeError::Usage(format!("encoding a label: {e}")))?;
    arr.write(l.slot() * label::SLOT_SIZE, &b)?;
    arr.flush()?;
    Ok(())
}

