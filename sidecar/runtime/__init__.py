"""What one process runs on: its clock, its threads and CPUs, its logs."""
