"""The worker (`lonca.service`): socket server, methods, log, state replay, sessions."""
