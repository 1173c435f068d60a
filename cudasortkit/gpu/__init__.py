"""The device: limits, streams, caller arrays, and timing."""
