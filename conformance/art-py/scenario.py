"""Drives Hone's training API with the OpenPipe ART client's serverless backend, unchanged and
called as its users call it: register a trainable model on Hone's demo base model; step 1
samples replies through the model's OpenAI client the way the OpenAI SDK and ART's examples
ask (logprobs=True, temperature 1, no return_token_ids) and scores them with binary rewards;
step 2 records two-turn rollouts with ART's capture API (capture_auto_trajectory); both steps
call backend.train with its defaults; then chat with the resulting checkpoint. (model.log
writes local files only in this client, and needs pyarrow, which openpipe-art does not
install; it is left out.)
Environment: HONE_URL, HONE_KEY.
Prints {"steps": [...], "final_step": N, "rewards": [...], "turns": N, "served_model": "..."}
as its last line.

The ART client's SFT path uploads its data to W&B Artifacts, which Hone cannot reach; Hone's
SFT jobs are exercised through the HTTP API by the Go tests.
"""
import asyncio
import json
import os

import art
from art.serverless.backend import ServerlessBackend

PROMPTS = ["Say a word.", "Name a city."]


def binary(content: str | None) -> float:
    """1.0 for a reply with an even number of characters, else 0.0."""
    return 1.0 if len(content or "") % 2 == 0 else 0.0


async def main():
    backend = ServerlessBackend(api_key=os.environ["HONE_KEY"], base_url=os.environ["HONE_URL"] + "/v1")
    model = art.TrainableModel(name="art-agent", project="art", entity="local", base_model="demo")
    await model.register(backend)
    client = model.openai_client()
    steps, rewards = [], []

    # Step 1: a plain OpenAI client's samples, binary rewards.
    groups = []
    for p in PROMPTS:
        messages = [{"role": "user", "content": p}]
        trajectories = []
        for i in range(4):
            completion = await client.chat.completions.create(
                model=model.get_inference_name(), messages=messages, max_tokens=8, temperature=1.0,
                logprobs=True, seed=i)
            choice = completion.choices[0]
            trajectories.append(art.Trajectory(messages_and_choices=[*messages, choice], reward=binary(choice.message.content)))
        groups.append(art.TrajectoryGroup(trajectories))
    rewards += [t.reward for g in groups for t in g.trajectories]
    result = await backend.train(model, groups)
    steps.append(result.step)

    # Step 2: rollouts recorded by the capture API, two turns each.
    async def rollout(prompt: str, seed: int) -> None:
        messages = [{"role": "user", "content": prompt}]
        first = await client.chat.completions.create(
            model=model.get_inference_name(), messages=messages, max_tokens=6, temperature=1.0, logprobs=True, seed=seed)
        messages += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Once more."}]
        second = await client.chat.completions.create(
            model=model.get_inference_name(), messages=messages, max_tokens=6, temperature=1.0, logprobs=True, seed=seed + 100)
        art.auto_trajectory(required=True).reward = binary(second.choices[0].message.content)

    groups = []
    turns = 0
    for p in PROMPTS:
        trajectories = [await art.capture_auto_trajectory(rollout(p, i)) for i in range(4)]
        turns += sum(1 for t in trajectories for m in t.messages_and_choices if not isinstance(m, dict))
        groups.append(art.TrajectoryGroup(trajectories))
    rewards += [t.reward for g in groups for t in g.trajectories]
    result = await backend.train(model, groups)
    steps.append(result.step)

    final = await model.get_step()
    reply = await client.chat.completions.create(
        model=model.get_inference_name(), messages=[{"role": "user", "content": "Hello"}], max_tokens=4)
    print(json.dumps({"steps": steps, "final_step": final, "rewards": rewards, "turns": turns,
                      "served_model": reply.model}))


if __name__ == "__main__":
    asyncio.run(main())
