"""Gateway benchmarks (`byref bench gateway`, `gateway-code`): what the gateway costs and saves.

Owns the run (`run`), its rig and bench upstream (`rig`, `upstream`), the SDK floor proxy
(`floor`), and one module per figure (`calls`, `lists`, `pool`, `replicas`, `surface`, `code`).
The law: every per-call figure is a ratio against the same call made directly or through the
SDK's own least proxy, measured in the same run.
"""
