"""Per-call client time of the OpenAI Agents SDK against mur's fake provider.

Run by `cargo bench --bench driver_bench` when `openai-agents` is installed (not by tests).
The bench starts the fake provider, runs this script with its endpoint, and subtracts the
server's own time per request, exactly as it does for mur's driver.

Usage: python3 agents_overhead.py ENDPOINT WARMUP N MODE
  MODE = agents  (Runner.run of a one-turn Agent on OpenAIChatCompletionsModel)
       | client  (AsyncOpenAI chat.completions.create, streamed, the SDK's transport alone)
Prints one line per measured call: the call's wall time in microseconds.
"""

import asyncio
import sys
import time


async def main() -> None:
    endpoint, warmup, n, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=endpoint, api_key="bench-key", max_retries=0)
    if mode == "agents":
        from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled

        set_tracing_disabled(True)
        agent = Agent(
            name="bench",
            instructions="You are a test.",
            model=OpenAIChatCompletionsModel(model="bench-model", openai_client=client),
        )

        async def call() -> None:
            await Runner.run(agent, "hi")

    else:

        async def call() -> None:
            stream = await client.chat.completions.create(
                model="bench-model",
                messages=[{"role": "system", "content": "You are a test."},
                          {"role": "user", "content": "hi"}],
                max_completion_tokens=1024,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _ in stream:
                pass

    for _ in range(warmup):
        await call()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        out.append((time.perf_counter() - t0) * 1e6)
    print("\n".join(f"{x:.1f}" for x in out))


asyncio.run(main())
