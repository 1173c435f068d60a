"""One call from arguments to a result: the request (argument checks), the
choice of plugin (select), and running it (execute)."""
