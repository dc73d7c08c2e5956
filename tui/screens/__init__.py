"""Modal and full screens: help, confirm, preset picker, finding details, comparison."""
