"""Multimodal datasets: streams on their own clocks, aligned onto one, windowed into a table."""
