//! `mosaic bitmap`: give an array without a journal a write-intent bitmap,
//! or take it away, as `mdadm --grow --bitmap=internal|none`.  The array
//! must not be served.

use anyhow::{bail, Result};
use clap::Args;

use mosaic_array::spec::ArraySpec;
use mosaic_array::Array;

use crate::cmd_array::BitmapArg;
use crate::util::{human, print_json, size};

#[derive(Args)]
pub struct BitmapArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// internal: a write-intent bitmap on every member, so the resync
    /// after a crash reads only the regions written near it; none: no
    /// bitmap (the resync reads every stripe)
    #[arg(value_enum)]
    pub bitmap: BitmapArg,
    /// Each member's bytes one bit covers (mdadm --bitmap-chunk)
    #[arg(long, value_parser = size, default_value = "64M")]
    pub bitmap_chunk: u64,
    /// Print the outcome as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BitmapArgs) -> Result<i32> {
    if crate::control::ask(&a.array, &crate::control::Request::Status)?.is_some() {
        bail!("{} is served: stop its server first (mosaic stop -a {}); the bitmap is changed offline", a.array, a.array);
    }
    let arr = Array::open(&ArraySpec::parse(&a.array)?, true)?;
    arr.set_bitmap(match a.bitmap {
        BitmapArg::Internal => Some(a.bitmap_chunk),
        BitmapArg::None => None,
    })?;
    let info = arr.info();
    arr.close()?;
    if a.json {
        print_json(&serde_json::json!({ "array": info.uuid, "bitmap": info.bitmap }))?;
    } else {
        match info.bitmap {
            Some(b) => println!("{}: write-intent bitmap of {} regions, {} of each member a bit", a.array, b.regions, human(b.chunk_bytes)),
            None => println!("{}: no write-intent bitmap (a resync after a crash reads every stripe)", a.array),
        }
    }
    Ok(0)
}
