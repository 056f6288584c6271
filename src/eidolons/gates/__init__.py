"""The gates: the orchestrator's mechanical gate, the receiver gate and the route gate."""
