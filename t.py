import ctypes, os, sys
lib = ctypes.CDLL("/work/wt-python/build-cpu/client/libgemmclient.so.0")
c = ctypes.c_void_p()
print("open", lib.gemm_client_open(ctypes.byref(c), b"ipc:///tmp/gd-nGXfZr/s"))
print("ping", lib.gemm_ping(c, None))
pid = os.fork()
if pid == 0:
    c2 = ctypes.c_void_p()
    print("child open", lib.gemm_client_open(ctypes.byref(c2), b"ipc:///tmp/gd-nGXfZr/s"), flush=True)
    os._exit(0)
print(os.waitpid(pid, 0))
