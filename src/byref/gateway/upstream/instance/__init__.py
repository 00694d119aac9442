"""One upstream instance: its process (`spawn`), what it is opened on (`transport`), its connection
and restarts (`connection`), every operation bounded in time (`bounds`), what the gateway asks of
it (`manager`) and the plain calls byref writes on its pipes (`raw_calls`)."""
