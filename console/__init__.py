"""The review console (`lonca.console`): Starlette routes over the socket client only."""
