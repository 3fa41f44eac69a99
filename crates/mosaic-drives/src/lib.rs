//! mosaic-drives (placeholder)
