//! Array specifications: `-a DIR` (a directory of member files) or
//! `-a PATH,PATH,...` (member files or block devices, any order).

use std::path::{Path, PathBuf};

use crate::ArrayError;

/// A parsed `-a` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArraySpec {
    /// A directory holding member files (created as `member-NN.img`).
    Dir(PathBuf),
    /// Explicit member paths.
    Paths(Vec<PathBuf>),
}

impl ArraySpec {
    pub fn parse(s: &str) -> Result<ArraySpec, ArrayError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ArrayError::Usage("empty array spec: give a directory or a comma list of member paths".into()));
        }
        if s.contains(',') {
            let paths: Vec<PathBuf> = s.split(',').map(|p| PathBuf::from(p.trim())).collect();
            if paths.iter().any(|p| p.as_os_str().is_empty()) {
                return Err(ArrayError::Usage(format!("array spec {s:?} has an empty member path")));
            }
            // One file however it is spelled (`/d/m1` and `./m1`).
            let one = |p: &PathBuf| if p.to_str().is_some_and(mosaic_dev::nbd::is_uri) { p.clone() } else { crate::assemble::canonical(p) };
            let mut sorted: Vec<PathBuf> = paths.iter().map(one).collect();
            sorted.sort();
            sorted.dedup();
            if sorted.len() != paths.len() {
                return Err(ArrayError::Usage(format!("array spec {s:?} names a member twice")));
            }
            return Ok(ArraySpec::Paths(paths));
        }
        let p = PathBuf::from(s);
        if p.is_dir() {
            Ok(ArraySpec::Dir(p))
        } else {
            // A single member path (a one-member array, e.g. raid0 over 1).
            Ok(ArraySpec::Paths(vec![p]))
        }
    }

    /// Member file name in a directory array.
    pub fn member_file(dir: &Path, index: usize) -> PathBuf {
        dir.join(format!("member-{index:02}.img"))
    }

    /// Paths of existing members to try, for opening.
    pub fn member_paths(&self) -> Result<Vec<PathBuf>, ArrayError> {
        match self {
            ArraySpec::Paths(p) => Ok(p.clone()),
            ArraySpec::Dir(d) => {
                let rd = std::fs::read_dir(d).map_err(|e| ArrayError::Usage(format!("{}: {e}", d.display())))?;
                let mut out = Vec::new();
                for ent in rd {
                    let ent = ent.map_err(|e| ArrayError::Io(format!("{}: {e}", d.display())))?;
                    let name = ent.file_name();
                    let name = name.to_string_lossy();
                    if name.starts_with('.') || name == crate::array::JOURNAL_FILE {
                        continue;
                    }
                    let ft = ent.file_type().map_err(|e| ArrayError::Io(e.to_string()))?;
                    if ft.is_file() || ft.is_symlink() {
                        out.push(ent.path());
                    }
                }
                out.sort();
                if out.is_empty() {
                    return Err(ArrayError::Usage(format!("{}: no member files in this directory", d.display())));
                }
                Ok(out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert!(ArraySpec::parse("").is_err());
        assert!(ArraySpec::parse("a,,b").is_err());
        assert!(ArraySpec::parse("a,b,a").unwrap_err().to_string().contains("twice"));
        // One file, two spellings.
        let cwd = std::env::current_dir().unwrap();
        let e = ArraySpec::parse(&format!("{}/a,./a,b", cwd.display())).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        assert_eq!(ArraySpec::parse("a, b").unwrap(), ArraySpec::Paths(vec!["a".into(), "b".into()]));
    }
}
