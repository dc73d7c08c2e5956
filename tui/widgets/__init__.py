"""The live panels. Each is a line-API widget fed immutable data; none does arithmetic on time series."""
