"""Testing tools: the differential fuzzer (`python -m ember.testing.fuzz --help`)."""
