"""One module per benchmark scenario; each exposes ``async def run(ctx) -> Section``."""
