//! Write-mostly mirror members (md's `--write-mostly`): in a mirror of
//! mixed drives (an SSD and an HDD), the slow copies are written as
//! always but read only when no other copy serves a stripe (a failed or
//! rebuilding member).  The choice is the planner's
//! ([`mosaic_core::FixedLayout::with_write_mostly`]), so the simulator
//! replaying the same flags plans the same reads; the superblocks keep
//! the slots.

use crate::array::{Array, Shape};
use crate::ArrayError;

impl Array {
    /// Make exactly `members` (slots) write-mostly; an empty list makes
    /// none.  Refused for a layout that is no mirror, a slot out of
    /// range, or every slot.  Requests in flight finish first.
    pub fn set_write_mostly(&self, members: &[usize]) -> Result<(), ArrayError> {
        self.check_writable()?;
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        let _g = self.gate.write();
        let sb = self.superblock();
        let shape = Shape::of(self.geometry(), sb.reshape.as_ref(), &members)?;
        if sb.write_mostly == members {
            return Ok(());
        }
        self.set_shape(shape);
        self.write_superblocks(|s| s.write_mostly = members)
    }

    /// The write-mostly slots, in order.
    pub fn write_mostly(&self) -> Vec<usize> {
        self.layout().write_mostly()
    }
}
