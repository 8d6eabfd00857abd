"""One module per step; each is ``async def run(ctx: StepContext) -> StepResult``."""
