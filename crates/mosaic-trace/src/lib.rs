//! mosaic-trace (placeholder)
