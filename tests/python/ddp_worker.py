"""One process of tests/python/ddp_test.py: a small model trained under DistributedDataParallel (gloo, CPU)
with the Monitor, or alone on the whole batch (world 1) as the reference.

Usage: ddp_worker.py RANK WORLD PORT OUT LOSS_FACTOR PLANT_RANK
The model and data are dyadic with few significant bits (weights k/4, inputs k/2, targets k/8), so that
every sum in forward and backward is exact in float32 and the order DDP adds in cannot change a bit: the
sharded job and the single process then hold the same tensors. The learning rate is 0 (an update would add
bits to the weights and end the exactness after a step); each step is a new batch on the same weights. PLANT_RANK >= 0 makes layer "0"'s output
infinite on that rank at step 2 (a forward hook registered before the Monitor).
"""
import os
import sys

import torch

import mpverify.torch as mt

STEPS, BATCH, EVERY = 5, 8, 2  # BATCH: the global batch, split evenly over the ranks


def model():
    g = torch.Generator().manual_seed(11)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randint(-4, 5, p.shape, generator=g).float() / 4)
    return net


def batches():
    g = torch.Generator().manual_seed(12)
    for _ in range(STEPS):
        yield torch.randint(-2, 3, (BATCH, 4), generator=g).float() / 2, torch.randint(-8, 9, (BATCH, 2), generator=g).float() / 8


def main(rank, world, port, out, loss_factor, plant_rank):
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    net = model()
    step = {"k": 0}
    if plant_rank == rank:
        net[0].register_forward_hook(lambda m, i, o: o * float("inf") if step["k"] == 2 else None)
    wrapped = torch.nn.parallel.DistributedDataParallel(net) if world > 1 else net
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.0)
    scaler = mt.GradScaler("torch", init_scale=2.0 ** 4, growth_interval=3)
    monitor = mt.Monitor(wrapped, opt, scaler=scaler, every=EVERY, out=out, seed=1, name="dyadic", verbose=False)
    share = BATCH // world
    for step["k"], (x, y) in enumerate(batches()):
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(wrapped(x), y) * loss_factor
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        monitor.step(loss)
    monitor.close()
    torch.save({n: p.detach().clone() for n, p in net.named_parameters()}, os.path.join(out + f".weights-{rank}.pt"))
    if world > 1:  # every rank done before the group goes: gloo aborts a rank whose peer left mid-exchange
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), int(sys.argv[6]))
