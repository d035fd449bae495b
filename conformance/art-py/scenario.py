"""Drives Hone's training API with the OpenPipe ART client's serverless backend, unchanged and
called as its users call it: register a trainable model on Hone's demo base model; step 1
samples replies through the model's OpenAI client the way the OpenAI SDK and ART's examples
ask (logprobs=True, temperature 1, no return_token_ids) and scores them with binary rewards;
step 2 records two-turn rollouts with ART's capture API (capture_auto_trajectory); both steps
call backend.train with its defaults. Step 3 is model.train_sft: the client writes the
trajectories to train.jsonl, logs it as a W&B dataset artifact through the wandb SDK
(WANDB_BASE_URL points at Hone, so the run, the upload and the commit go to Hone's W&B API)
and posts an SFT job with training_data_url wandb-artifact:///.../<name>:v0. The scenario
then downloads that artifact again with wandb.Api, logs validation trajectories with
model.log (parquet files here, metrics to the W&B run's history on Hone: WANDB_API_KEY is
set), deletes checkpoints with model.delete_checkpoints (keeps the latest and the best
val/reward step), reads the checkpoint list back, and chats with the SFT checkpoint. Last, the
checkpoints as W&B lora artifacts: the train result's artifact_name read with wandb.Api, the
model's versions after delete_checkpoints, the provenance ART recorded on the latest,
_experimental_pull_model_checkpoint, and _experimental_fork_checkpoint into a second model
that then trains one step from the forked checkpoint.
Environment: HONE_URL, HONE_KEY, WANDB_BASE_URL, WANDB_API_KEY.
Prints {"steps": [...], "final_step": N, "rewards": [...], "turns": N, "served_model": "...",
"sft_data_url": "...", "sft_downloaded_lines": N, "checkpoints": [...], "lora_artifact": "...",
"lora_aliases": [...], "lora_versions": [...], "latest_provenance": [...], "latest_aliases": [...],
"pulled_files": [...], "pulled_rank": N, "fork_step": N, "fork_versions": [...]} as its last line.
"""
import asyncio
import contextlib
import io
import json
import os
import re
import tempfile

import art
import wandb
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
    # The result names the step's checkpoint as a W&B lora artifact.
    api = wandb.Api()
    lora = api.artifact(result.artifact_name, type="lora")

    # Validation metrics for steps 1 and 2 through model.log: step 1 is the best by val/reward.
    await model.log([art.TrajectoryGroup([art.Trajectory(messages_and_choices=[{"role": "user", "content": "x"}], reward=1.0)])],
                    split="val", step=1)
    await model.log([art.TrajectoryGroup([art.Trajectory(messages_and_choices=[{"role": "user", "content": "x"}], reward=0.0)])],
                    split="val", step=2)

    # Step 3: SFT through the client's W&B artifact upload.
    sft = [art.Trajectory(messages_and_choices=[{"role": "user", "content": p},
                                                {"role": "assistant", "content": "Paris is a city."}], reward=0.0)
           for p in PROMPTS * 2]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await model.train_sft(sft, config=art.TrainSFTConfig(learning_rate=1e-3, batch_size=2), verbose=True)
    m = re.search(r"Artifact URL: (wandb-artifact:///\S+)", out.getvalue())
    assert m, out.getvalue()
    sft_url = m.group(1)
    steps.append(await model.get_step())

    # The SFT data artifact, fetched back through the wandb SDK's public API (with an empty
    # cache: the upload left the file in the default one, and the SDK would not download it).
    with tempfile.TemporaryDirectory() as d:
        os.environ["WANDB_CACHE_DIR"] = os.path.join(d, "cache")
        artifact = wandb.Api().artifact(sft_url.removeprefix("wandb-artifact:///"), type="dataset")
        artifact.download(root=os.path.join(d, "data"))
        with open(os.path.join(d, "data", "train.jsonl")) as f:
            downloaded = [json.loads(line) for line in f]
    assert downloaded[0]["messages"][1]["content"] == "Paris is a city.", downloaded

    # Keep the latest (3) and the best val/reward step (1); step 2 goes.
    await model.delete_checkpoints()
    checkpoints = sorted([c.step async for c in backend._client.models.checkpoints.list(model_id=model.id)])

    final = await model.get_step()
    reply = await client.chat.completions.create(
        model=model.get_inference_name(), messages=[{"role": "user", "content": "Hello"}], max_tokens=4)

    # The checkpoints as W&B lora artifacts: the versions of the model's collection after
    # delete_checkpoints, the provenance ART recorded on the
    # latest, and _experimental_pull_model_checkpoint's download.
    lora_versions = sorted(sorted(a for a in v.aliases if a.startswith("step"))[0]
                           for v in api.artifacts("lora", "local/art/art-agent"))
    latest = api.artifact("local/art/art-agent:latest", type="lora")
    with tempfile.TemporaryDirectory() as d:
        os.environ["WANDB_CACHE_DIR"] = os.path.join(d, "cache")
        pulled = await backend._experimental_pull_model_checkpoint(model, step=final, local_path=os.path.join(d, "pulled"))
        pulled_files = sorted(os.listdir(pulled))
        with open(os.path.join(pulled, "adapter_config.json")) as f:
            pulled_rank = json.load(f)["r"]

        # A second model forked from the first's latest checkpoint (the fork logs it as a lora
        # artifact of the new model), then trained one step on top of it.
        fork = art.TrainableModel(name="art-fork", project="art", entity="local", base_model="demo")
        await fork.register(backend)
        await backend._experimental_fork_checkpoint(fork, from_model="art-agent")
        fork_result = await backend.train(fork, groups)
    fork_versions = sorted(sorted(a for a in v.aliases if a.startswith("step"))[0]
                           for v in api.artifacts("lora", "local/art/art-fork"))
    print(json.dumps({"steps": steps, "final_step": final, "rewards": rewards, "turns": turns,
                      "served_model": reply.model, "sft_data_url": sft_url,
                      "sft_downloaded_lines": len(downloaded), "checkpoints": checkpoints,
                      "lora_artifact": result.artifact_name, "lora_aliases": sorted(lora.aliases),
                      "lora_versions": lora_versions, "latest_provenance": latest.metadata.get("wandb.provenance"),
                      "latest_aliases": sorted(latest.aliases), "pulled_files": pulled_files, "pulled_rank": pulled_rank,
                      "fork_step": fork_result.step, "fork_versions": fork_versions}))


if __name__ == "__main__":
    asyncio.run(main())
