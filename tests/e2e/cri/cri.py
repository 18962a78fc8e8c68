#!/usr/bin/python3
"""A small CRI client for bulkhead's CRI test (CI cannot fetch crictl).

Speaks gRPC to containerd's socket with messages generated from
cri_subset.proto (the CRI's own field numbers). One call per invocation,
requests given as JSON (protobuf's JSON mapping), replies printed as JSON:

  cri.py SOCKET runp POD.json [HANDLER]      -> pod sandbox id
  cri.py SOCKET create POD_ID CTR.json POD.json -> container id
  cri.py SOCKET start|stop|rm|status ID
  cri.py SOCKET exec ID CMD...               -> stdout; exits with CMD's status
  cri.py SOCKET stopp|rmp POD_ID

A gRPC error prints its status and message on stderr and exits 3.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load_messages():
    out = tempfile.mkdtemp(prefix="bh-cri-pb-")
    subprocess.run(["protoc", "-I", HERE, "--python_out=" + out, "cri_subset.proto"],
                   check=True)
    sys.path.insert(0, out)
    import cri_subset_pb2  # noqa: E402  (generated just above)
    return out, cri_subset_pb2


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    import grpc
    from google.protobuf import json_format
    tmp, pb = load_messages()
    try:
        channel = grpc.insecure_channel("unix://" + argv[1])

        def call(name, req, reply_type):
            fn = channel.unary_unary("/runtime.v1.RuntimeService/" + name,
                                     request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=reply_type.FromString)
            return fn(req, timeout=120)

        def from_json(path, msg_type):
            with open(path) as f:
                return json_format.Parse(f.read(), msg_type())

        op, args = argv[2], argv[3:]
        if op == "runp":
            req = pb.RunPodSandboxRequest(config=from_json(args[0], pb.PodSandboxConfig),
                                          runtime_handler=args[1] if len(args) > 1 else "")
            print(call("RunPodSandbox", req, pb.RunPodSandboxResponse).pod_sandbox_id)
        elif op == "create":
            req = pb.CreateContainerRequest(
                pod_sandbox_id=args[0], config=from_json(args[1], pb.ContainerConfig),
                sandbox_config=from_json(args[2], pb.PodSandboxConfig))
            print(call("CreateContainer", req, pb.CreateContainerResponse).container_id)
        elif op == "start":
            call("StartContainer", pb.StartContainerRequest(container_id=args[0]),
                 pb.StartContainerResponse)
        elif op == "stop":
            call("StopContainer", pb.StopContainerRequest(container_id=args[0], timeout=10),
                 pb.StopContainerResponse)
        elif op == "rm":
            call("RemoveContainer", pb.RemoveContainerRequest(container_id=args[0]),
                 pb.RemoveContainerResponse)
        elif op == "status":
            r = call("ContainerStatus", pb.ContainerStatusRequest(container_id=args[0]),
                     pb.ContainerStatusResponse)
            print(json_format.MessageToJson(r.status, including_default_value_fields=True))
        elif op == "exec":
            r = call("ExecSync", pb.ExecSyncRequest(container_id=args[0], cmd=args[1:],
                                                    timeout=60), pb.ExecSyncResponse)
            sys.stdout.write(r.stdout.decode(errors="replace"))
            sys.stderr.write(r.stderr.decode(errors="replace"))
            return r.exit_code
        elif op == "stopp":
            call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=args[0]),
                 pb.StopPodSandboxResponse)
        elif op == "rmp":
            call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=args[0]),
                 pb.RemovePodSandboxResponse)
        else:
            print("cri.py: unknown operation " + op, file=sys.stderr)
            return 2
        return 0
    except grpc.RpcError as e:
        print("cri.py: %s: %s: %s" % (argv[2], e.code().name, e.details()), file=sys.stderr)
        return 3
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
