"""Drives Hone's training API with the OpenPipe ART client's serverless backend, unchanged:
register a trainable model on Hone's demo base model, run two RL steps whose trajectories are
sampled through the model's OpenAI client (Hone's chat completions, with logprobs and token
ids), and chat with the resulting checkpoint. Environment: HONE_URL, HONE_KEY.
Prints {"steps": [...], "final_step": N, "reply": "..."} as its last line.

The ART client's SFT path uploads its data to W&B Artifacts, which Hone cannot reach; Hone's
SFT jobs are exercised through the HTTP API by the Go tests.
"""
import asyncio
import json
import os

import art
from art.serverless.backend import ServerlessBackend


async def main():
    backend = ServerlessBackend(api_key=os.environ["HONE_KEY"], base_url=os.environ["HONE_URL"] + "/v1")
    model = art.TrainableModel(name="art-agent", project="art", entity="local", base_model="demo")
    await model.register(backend)
    client = model.openai_client()
    steps = []
    for step in range(2):
        groups = []
        for p in ["Say a word.", "Name a city."]:
            messages = [{"role": "user", "content": p}]
            trajectories = []
            for i in range(4):
                completion = await client.chat.completions.create(
                    model=model.get_inference_name(), messages=messages, max_tokens=6, seed=step * 10 + i,
                    logprobs=True, extra_body={"return_token_ids": True})
                choice = completion.choices[0]
                reward = float(len(choice.message.content or "") % 3) / 2.0
                trajectories.append(art.Trajectory(messages_and_choices=[*messages, choice], reward=reward))
            groups.append(art.TrajectoryGroup(trajectories))
        result = await backend.train(model, groups, learning_rate=1e-3)
        steps.append(result.step)
    final = await model.get_step()
    reply = await client.chat.completions.create(
        model=model.get_inference_name(), messages=[{"role": "user", "content": "Hello"}], max_tokens=4)
    print(json.dumps({"steps": steps, "final_step": final, "reply": reply.choices[0].message.content,
                      "served_model": reply.model}))


if __name__ == "__main__":
    asyncio.run(main())
