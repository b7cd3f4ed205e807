# CUDA backend: build/libllm_cuda.so, which llm-engine dlopen()s for --backend cuda.
# Included by the top-level Makefile (or: make -f Makefile -f kernels/cuda.mk cuda).
# Built only where nvcc exists (on PATH or in /usr/local/cuda/bin); elsewhere `make cuda` says so.
ifndef LLM_CUDA_MK
LLM_CUDA_MK := 1

NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })

.PHONY: cuda
ifneq ($(NVCC),)
CUDA_HOME    ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_SRC     := $(wildcard kernels/*.cu)
CUDA_OBJ     := $(CUDA_SRC:%.cu=$(BUILD)/obj/%.o)
CUDA_HDR     := $(wildcard kernels/*.cuh) engine/backend.h engine/backend_util.h engine/model.h engine/common.h \
                engine/gguf_quants.h engine/parallel.h engine/model_tp.h
# sm_90 machine code for Hopper plus compute_90 PTX the driver can compile for newer chips.
CUDA_GENCODE := -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS    ?= -O3 -lineinfo
NVCCFLAGS    += -std=c++17 $(CUDA_GENCODE) -Iengine -Ishm -Werror all-warnings \
                -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror

$(BUILD)/obj/kernels/%.o: kernels/%.cu $(CUDA_HDR)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libllm_cuda.so: $(CUDA_OBJ)
	$(NVCC) -shared $(CUDA_GENCODE) -o $@ $^ -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 \
		-lcublas -lcublasLt -lcudart

cuda: $(BUILD)/libllm_cuda.so
all: cuda
else
cuda:
	@echo "nvcc not found (PATH, /usr/local/cuda/bin): the CUDA backend is not built"
endif

endif
