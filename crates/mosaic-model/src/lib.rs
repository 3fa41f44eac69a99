//! mosaic-model (placeholder)
