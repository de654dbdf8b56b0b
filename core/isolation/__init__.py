"""Where model code runs: the pool (front end, no torch) <-> the warm zygote <-> one
disposable job process per request, and the typed messages between them."""
