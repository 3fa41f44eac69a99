//! mosaic-tier: the hybrid SSD+HDD tier (work in progress).
