//! SIGINT/SIGTERM to a stop flag for [`crate::serve`] (signal-hook): the
//! first signal asks for a clean stop, a second one exits at once.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// A flag that becomes true on the first SIGINT or SIGTERM.
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag before this signal sets it.
        flag::register_conditional_shutdown(sig, 130, stop.clone())?;
        flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}
