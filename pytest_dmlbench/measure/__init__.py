"""Measurement: the clock, rank-agreed timing rounds, collective instrumentation, memory, statistics."""
