//! mosaic-cli's integration tests as one binary: each file in `tests/` is a
//! module here (why, and the check that none is left out: mosaic-cli's
//! `tests/test_layout.rs`).

mod common;
mod cli_adapt;
mod cli_advise;
mod cli_array;
mod cli_bench_input;
mod cli_cache;
mod cli_cbro;
mod cli_config;
mod cli_control;
mod cli_copies;
mod cli_data_safety;
mod cli_dvs;
mod cli_dvs_paths;
mod cli_eval_input;
mod cli_eval_ppc;
mod cli_grow_size;
mod cli_events;
mod cli_hot_replace;
mod cli_journal;
mod cli_journal_damage;
mod cli_remap;
mod cli_remote;
mod cli_replay_cache;
mod cli_replay_real;
mod cli_safety;
mod cli_scan;
mod cli_serve_safety;
mod cli_service;
mod cli_sim;
mod cli_tier;
mod cli_tls;
mod cli_volume;
mod cli_write_mostly;
mod test_layout;
