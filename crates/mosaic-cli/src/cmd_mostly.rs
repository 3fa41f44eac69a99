//! `mosaic write-mostly`: which members of a mirror are read only when
//! no other copy serves (mdadm's `--write-mostly`: the slow side of a
//! mirror of mixed drives), online when served.

use anyhow::Result;
use clap::Args;

use crate::cmd_array::open;
use crate::control::{ask, print_remote, Request};

#[derive(Args)]
pub struct WriteMostlyArgs {
    /// The array: a directory or a comma list of member paths
    #[arg(short = 'a', long = "array")]
    pub array: String,
    /// A member (its slot) to read only when no other copy serves; repeat
    /// or give a comma list.  Members not named stop being write-mostly
    #[arg(long = "member", value_name = "N", value_delimiter = ',', required_unless_present = "none")]
    pub members: Vec<usize>,
    /// Make no member write-mostly
    #[arg(long, conflicts_with = "members")]
    pub none: bool,
    /// Print the outcome as JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: WriteMostlyArgs) -> Result<i32> {
    let members = if a.none { Vec::new() } else { a.members.clone() };
    if let Some(b) = ask(&a.array, &Request::WriteMostly { members: members.clone() })? {
        return print_remote(&b, a.json);
    }
    let vol = open(&a.array, true)?;
    vol.set_write_mostly(&members)?;
    let body = outcome(&now(vol.as_ref()), false);
    vol.close()?;
    print_remote(&body, a.json)
}

/// The write-mostly members of `vol`, by its info.
pub(crate) fn now(vol: &dyn mosaic_volume::Volume) -> Vec<usize> {
    vol.info().members.iter().filter(|m| m.write_mostly).map(|m| m.index).collect()
}

/// What `write-mostly` answers: the members now write-mostly.
pub(crate) fn outcome(members: &[usize], served: bool) -> serde_json::Value {
    let text = match members {
        [] => "no member is write-mostly: reads spread over every copy\n".to_string(),
        m => format!("write-mostly members {m:?}: read only when no other copy serves\n"),
    };
    serde_json::json!({ "json": { "write_mostly": members, "served": served }, "text": text, "code": 0 })
}
