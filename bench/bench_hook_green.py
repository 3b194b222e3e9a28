"""Cost of a green decision with a long forecast: a year of minutely samples (525,600), 100 idle
nodes of 32 CPUs, 30 submissions of 8 CPUs for 2 hours due in 2 days, on the service's own
decision path (no socket).  Prints the view's build time and the median and largest decision time.

    python bench/bench_hook_green.py
"""
import time, json, numpy as np
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.service import DecisionService
from greenslurm.slurm_plugin.forecast import Forecast
from greenslurm.slurm_plugin.snapshot import Snapshot, LiveNode
from greenslurm.clustermodel.renewable import SupplySeries
import greenslurm.slurm_plugin.service as S
T=1_800_000_000.0
n=525_600
times=T-86400+60.0*np.arange(n); watts=np.abs(np.sin(np.arange(n)/720.0))*5000
cfg=HookConfig(renewable="green", supply_file="/x.csv")
svc=DecisionService(cfg, DecisionRecord(":memory:"))
svc.forecast=Forecast(SupplySeries(times, watts), T, "/x.csv")
t=time.perf_counter(); svc.view=svc.install_view(Snapshot(T, [LiveNode(f"n{i}",32,4000) for i in range(100)]), T); print("view", time.perf_counter()-t)
S.time.time=lambda: T+1
ds=[]
for i in range(30):
    r={"op":"submit","id":i,"user":"ana","min_cpus":8,"num_tasks":1,"time_limit":120,"submit_time":int(T),"deadline":str(int(T+86400*2))}
    t=time.perf_counter(); a=svc.handle((json.dumps(r)+"\n").encode()); ds.append(time.perf_counter()-t)
print("decide median ms", 1e3*sorted(ds)[15], "max", 1e3*max(ds), a.get("begin_time"))
