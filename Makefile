# ngx_llm top-level build.
#   make            build/llm-engine (+ the NGINX module, CUDA backend as they land)
#   make test       every test: C unit tests (plain and under ASan+UBSan), parity tests
#   make san        unit tests under AddressSanitizer + UndefinedBehaviorSanitizer only

CC      ?= cc
MAKEFLAGS += -j$(shell nproc)
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g $(OPT) -Iengine -Ishm -fPIC
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
LIBS    = -lcjson -lpcre2-8 -lhiredis -lpthread -lm

# SIMD kernels are compiled per file for their instruction set and picked at run time.
AVX2_FLAGS   = -mavx2 -mfma -mf16c
AVX512_FLAGS = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c -mavx2
VNNI_FLAGS   = $(AVX512_FLAGS) -mavx512vnni
AVXVNNI_FLAGS = $(AVX2_FLAGS) -mavxvnni
BF16_FLAGS   = $(VNNI_FLAGS) -mavx512bf16
AMX_FLAGS    = $(BF16_FLAGS) -mamx-tile -mamx-bf16

ENGINE_MAIN = engine/main.c $(wildcard engine/cli_*.c) engine/llm_client_main.c
ENGINE_SRC  = $(filter-out $(ENGINE_MAIN),$(wildcard engine/*.c engine/cpu/*.c shm/*.c))
ENGINE_OBJ  = $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ    = $(filter-out %/llm_client_main.o,$(ENGINE_MAIN:%.c=$(BUILD)/obj/%.o))
CLI_OBJ     = $(BUILD)/obj/engine/cli_args.o
TEST_SRC    = $(wildcard tests/test_*.c)
TEST_BIN    = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all engine module dashboard tests test unit san parity test-nginx test-dashboard test-openai-sdk test-serve bench-serve serve stop clean install uninstall
all: engine module
engine: $(BUILD)/llm-engine $(BUILD)/llm-client

# Each kernel table's file gets its instruction set's flags (KFLAGS), every other object none.
$(BUILD)/obj/%_avx2.o:       KFLAGS = $(AVX2_FLAGS)
$(BUILD)/obj/%_avx512.o:     KFLAGS = $(AVX512_FLAGS)
$(BUILD)/obj/%_avx2vnni.o:   KFLAGS = $(AVXVNNI_FLAGS)
$(BUILD)/obj/%_avx512vnni.o: KFLAGS = $(VNNI_FLAGS)
$(BUILD)/obj/%_avx512bf16.o: KFLAGS = $(BF16_FLAGS)
$(BUILD)/obj/%_avx512amx.o:  KFLAGS = $(AMX_FLAGS)
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(KFLAGS) -MMD -c $< -o $@

$(BUILD)/libllm.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/llm-engine: $(MAIN_OBJ) $(BUILD)/libllm.a
	$(CC) $(LDFLAGS) -o $@ $(MAIN_OBJ) $(BUILD)/libllm.a $(LIBS)

$(BUILD)/llm-client: $(BUILD)/obj/engine/llm_client_main.o $(CLI_OBJ) $(BUILD)/libllm.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/%: tests/%.c tests/tap.h $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -o $@ $< $(BUILD)/libllm.a $(LIBS) $(LDFLAGS)

tests: $(TEST_BIN) $(BUILD)/llm-engine $(BUILD)/llm-client

# Unit tests run from the repo root (they find ../shared relative to it).
unit: tests
	prove -e '' $(TEST_BIN)

san:
	$(MAKE) BUILD=build-san SAN=1 OPT=-O1 unit

# The NGINX dynamic module, built against Debian's nginx source tree (nginx-dev).
module: $(BUILD)/llm-engine
	ngx_module/build.sh $(BUILD)

# make serve [PORT=8080] [MODEL=path] [MODELS="path ..."] [BACKEND=cpu] [REPLICAS=N] [TP=N]: engine(s) + nginx in the
# background (tools/serve.sh).
PORT    ?= 8080
MODEL   ?= ../shared/models/stories260K/stories260K.gguf
BACKEND ?= cpu
serve: engine module dashboard
	tools/serve.sh start $(BUILD) $(PORT) $(MODEL) $(BACKEND)
stop:
	tools/serve.sh stop $(BUILD) $(PORT)

# make install [PREFIX=/usr/local] [DESTDIR=]: the engine and client into PREFIX/bin (libllm_cuda.so, where
# built, into PREFIX/lib/ngx_llm), the module into the system nginx's modules directory and enabled as
# Debian's nginx enables modules (modules-available + a link in /etc/nginx/modules-enabled), the systemd
# template unit llm-engine@.service and /etc/ngx_llm/example.env. The module is built against the
# distribution's nginx source (nginx-dev), so it loads into that same nginx.
PREFIX      ?= /usr/local
NGX_MODULES ?= $(or $(shell nginx -V 2>&1 | sed -n 's/.*--modules-path=\([^ ]*\).*/\1/p'),/usr/lib/nginx/modules)
SYSTEMD_DIR ?= /etc/systemd/system
install: engine module
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(NGX_MODULES) $(DESTDIR)/usr/share/nginx/modules-available \
		$(DESTDIR)/etc/nginx/modules-enabled $(DESTDIR)$(SYSTEMD_DIR) $(DESTDIR)/etc/ngx_llm
	install -m 755 $(BUILD)/llm-engine $(BUILD)/llm-client $(DESTDIR)$(PREFIX)/bin/
	if [ -f $(BUILD)/libllm_cuda.so ]; then install -d $(DESTDIR)$(PREFIX)/lib/ngx_llm && \
		install -m 755 $(BUILD)/libllm_cuda.so $(DESTDIR)$(PREFIX)/lib/ngx_llm/; fi
	install -m 644 $(BUILD)/ngx_http_llm_module.so $(DESTDIR)$(NGX_MODULES)/
	sed 's|@MODULES@|$(NGX_MODULES)|' tools/systemd/mod-http-llm.conf \
		> $(DESTDIR)/usr/share/nginx/modules-available/mod-http-llm.conf
	ln -sfn /usr/share/nginx/modules-available/mod-http-llm.conf $(DESTDIR)/etc/nginx/modules-enabled/50-mod-http-llm.conf
	sed 's|@BINDIR@|$(PREFIX)/bin|' tools/systemd/llm-engine@.service > $(DESTDIR)$(SYSTEMD_DIR)/llm-engine@.service
	install -m 644 tools/systemd/example.env $(DESTDIR)/etc/ngx_llm/example.env
	install -m 644 nginx.conf.example $(DESTDIR)/etc/ngx_llm/nginx.conf.example
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/llm-engine $(DESTDIR)$(PREFIX)/bin/llm-client \
		$(DESTDIR)$(PREFIX)/lib/ngx_llm/libllm_cuda.so $(DESTDIR)$(NGX_MODULES)/ngx_http_llm_module.so \
		$(DESTDIR)/usr/share/nginx/modules-available/mod-http-llm.conf \
		$(DESTDIR)/etc/nginx/modules-enabled/50-mod-http-llm.conf $(DESTDIR)$(SYSTEMD_DIR)/llm-engine@.service \
		$(DESTDIR)/etc/ngx_llm/example.env $(DESTDIR)/etc/ngx_llm/nginx.conf.example
	-rmdir $(DESTDIR)$(PREFIX)/lib/ngx_llm $(DESTDIR)/etc/ngx_llm 2>/dev/null

# The live dashboard page (uPlot from npm) copied to $(BUILD)/dashboard/.
dashboard:
	dashboard/build.sh $(BUILD)

test-dashboard: engine module dashboard
	BUILD=$(BUILD) tests/dashboard/run.sh

# Supervisor (kill -9 the worker ten times) and Redis publishing (skips without redis-server).
test-serve: engine module
	BUILD=$(BUILD) prove tests/serve/

# The official OpenAI Node.js SDK against make serve.
test-openai-sdk: engine module
	BUILD=$(BUILD) tests/openai_sdk/run.sh

bench-serve: engine module
	BUILD=$(BUILD) bench/serve_load/run.sh

# Helpers of the parity tests: llama.cpp's quantiser and dequantisers as a reference
# (tests/parity/ggml_ref.c), stories260K widened for K-quants (pad_model.c) and one
# backend's logits for a token sequence.
PARITY_PROGS = $(BUILD)/parity/ggml_ref $(BUILD)/parity/pad_model $(BUILD)/parity/logits_dump
$(BUILD)/parity/%: tests/parity/%.c $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libllm.a $(LIBS) -ldl
$(BUILD)/parity/logits_dump: tests/gpu/logits_dump.c $(BUILD)/libllm.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libllm.a $(LIBS) -ldl

# Side by side, one a core: most of them spend their time in one process at a time (ours or llama.cpp's).
PARITY_JOBS ?= $(shell nproc)
parity: $(BUILD)/llm-engine $(PARITY_PROGS)
	BUILD=$(BUILD) prove -j$(PARITY_JOBS) tests/parity/

# The CUDA backend's kernels and host code run under the CPU emulation of CUDA (a quick set; the full one:
# tests/gpu/emu_parity.sh). No GPU and no CUDA toolkit needed.
test-emu: $(BUILD)/llm-engine
	tests/gpu/emu_quick.sh $(BUILD)

test-nginx: module
	t/run.sh $(BUILD)

test: all unit
	$(MAKE) san
	$(MAKE) parity
	$(MAKE) test-emu
	$(MAKE) test-serve
	$(MAKE) test-nginx
	$(MAKE) test-openai-sdk
	$(MAKE) test-dashboard

clean:
	rm -rf build build-san

# The CUDA backend (build/libllm_cuda.so) wherever nvcc exists; `all` builds it.
include kernels/cuda.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
