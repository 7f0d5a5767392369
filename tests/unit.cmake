# Unit tests of the daemon's modules, linked against gemmd_core.
