//! The help is part of the interface: every flag says what it is, `create
//! --help` names every level `--level` takes, the exit statuses are in
//! `mosaic --help`, and every page fits 80 columns.

use clap::CommandFactory;

use crate::cmd_array::LEVELS;
use crate::Cli;

/// Every command, subcommands included, with its path (`mosaic eval ppc`).
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(path: String, c: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
        for s in c.get_subcommands() {
            walk(format!("{path} {}", s.get_name()), s, out);
        }
        out.push((path, c.clone()));
    }
    let mut root = Cli::command();
    root.build();
    let mut out = Vec::new();
    walk("mosaic".into(), &root, &mut out);
    out
}

fn text(s: Option<&clap::builder::StyledStr>) -> String {
    s.map(|s| s.to_string()).unwrap_or_default()
}

#[test]
fn every_argument_and_command_has_a_description() {
    let mut missing = Vec::new();
    for (path, c) in commands() {
        if path != "mosaic" && text(c.get_about()).trim().is_empty() {
            missing.push(format!("{path} (the command)"));
        }
        for a in c.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if text(a.get_help()).trim().is_empty() && text(a.get_long_help()).trim().is_empty() {
                missing.push(format!("{path} {}", a.get_long().map(|l| format!("--{l}")).unwrap_or_else(|| id.to_uppercase())));
            }
        }
    }
    assert!(missing.is_empty(), "arguments without a description in --help:\n  {}", missing.join("\n  "));
}

#[test]
fn create_help_names_every_level() {
    let mut root = Cli::command();
    let help = root.find_subcommand_mut("create").expect("create").render_long_help().to_string();
    for (syntax, _, _) in LEVELS {
        assert!(help.contains(syntax), "`mosaic create --help` does not name {syntax}:\n{help}");
    }
    let short = root.find_subcommand_mut("create").expect("create").render_help().to_string();
    for (syntax, _, _) in LEVELS {
        assert!(short.contains(syntax), "`mosaic create -h` does not name {syntax}:\n{short}");
    }
}

/// The list is the levels the parsers take: each example is accepted by
/// the parser `create` sends it to, and every level of `mosaic_core` is
/// listed.
#[test]
fn the_level_list_matches_the_parsers() {
    use mosaic_core::Level;
    for (syntax, example, _) in LEVELS {
        let ok = match *example {
            "tier" | "remap" => true,
            e if e.starts_with("dvs") => crate::cmd_dvs::dvs_parity(e).is_some(),
            e => mosaic_array::nested::split_cda(e).map(|s| s.is_some()).unwrap_or(false) || e.parse::<Level>().is_ok(),
        };
        assert!(ok, "{syntax}: its example {example:?} is not a level create takes");
    }
    let listed = |name: &str| LEVELS.iter().any(|(s, _, _)| s.split([':', '[']).next() == Some(name));
    let every = [Level::Raid0, Level::Raid1, Level::Raid4, Level::Raid5, Level::Raid6, Level::Rs { k: 4, m: 2 }, Level::Cbro { n: 4, k: 1, w: 1 }];
    for l in every {
        // A new level fails to compile here until it is added to `every` (and LEVELS).
        match l {
            Level::Raid0 | Level::Raid1 | Level::Raid4 | Level::Raid5 | Level::Raid6 | Level::Rs { .. } | Level::Cbro { .. } => {}
        }
        let name = l.to_string();
        let name = name.split(':').next().unwrap_or_default();
        assert!(listed(name), "level {l} is missing from create's list");
    }
    for special in ["dvs", "tier", "remap"] {
        assert!(listed(special), "{special} is missing from create's list");
    }
}

#[test]
fn top_level_help_lists_the_exit_statuses() {
    let help = Cli::command().render_long_help().to_string();
    for line in ["0  ", "1  ", "2  ", "3  ", "4  ", "5  "] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(line)), "no exit status {line:?} in `mosaic --help`:\n{help}");
    }
    assert!(help.contains("Exit status"), "{help}");
    assert!(help.contains("Sizes (") && help.contains("64K"), "no size grammar in `mosaic --help`:\n{help}");
}

/// Every line but the usage line (clap does not wrap it: it lists the
/// required flags of `read` and `replace` whole).
#[test]
fn every_help_page_fits_80_columns() {
    let mut wide = Vec::new();
    for (path, mut c) in commands() {
        for (which, page) in [("-h", c.render_help().to_string()), ("--help", c.render_long_help().to_string())] {
            for l in page.lines().filter(|l| l.chars().count() > 80 && !l.starts_with("Usage: ")) {
                wide.push(format!("{path} {which}: {l}"));
            }
        }
    }
    assert!(wide.is_empty(), "help lines wider than 80 columns:\n{}", wide.join("\n"));
}
