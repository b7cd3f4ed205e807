/* llm-engine: the engine's command line. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
        "usage: llm-engine COMMAND [options]\n"
        "\n"
        "commands:\n"
        "  generate   --model PATH [--tokenizer PATH] (--prompt TEXT | --prompt-ids 1,2,3) --max-tokens N\n"
        "             [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--typical-p P] [--repeat-penalty R]\n"
        "             [--presence-penalty P] [--frequency-penalty F] [--logit-bias ID=B,...] [--seed S]\n"
        "             [--json | --json-schema FILE] [--threads N] [--ignore-eos] [--output-ids] [--backend cpu]\n"
        "  embed      --model PATH [--tokenizer PATH] (--prompt TEXT | --prompt-ids 1,2,3 | --input-file FILE)\n"
        "             [--pooling last|mean|cls] [--no-normalize] [--max-batch-size 32] [--threads N] [--backend cpu]\n"
        "             [--warmup]\n"
        "  tokenize   (--model PATH | --tokenizer PATH) --text TEXT [--bos] [--special]\n"
        "  info       --model PATH\n"
        "  serve      --model PATH --shm NAME [--tokenizer PATH] [--max-batch-size 32]\n"
        "             [--preferred-batch-sizes 8,16] [--batch-timeout-ms 5] [--max-batched-tokens 2048]\n"
        "             [--kv-blocks auto|N] [--block-size 16] [--threads N] [--slots 256] [--stream-cap 1024]\n"
        "             [--max-waiting N] [--shm-mode 0600] [--backend cpu|cuda] [--device N]\n"
        "             [--oom-recover-ms 1000] [--mask-threads 2] [--pooling last|mean|cls] [--spec-ngram K | --draft-model PATH [--draft-tokens 8] [--draft-fixed]] (supervision, Redis, tuning: see README)\n"
        "  gen-model  (--preset tiny|tiny-llama3|stories110m|llama-3.2-1b|llama-3.2-3b|tiny-qwen2|tiny-qwen3|\n"
        "             tiny-gemma3|tiny-gemma2|gemma-3-1b|tiny-phi3|tiny-smollm3|tiny-granite|tiny-qwen3moe|...|\n"
        "             tiny-bert|tiny-bert-cls|tiny-bert-rerank|bge-small|bge-base|\n"
        "                       qwen2.5-0.5b|qwen3-0.6b | --from MODEL [--format gguf|hf])\n"
        "             --dtype f32|f16|bf16|q8_0|q4_0|q2_K|q3_K|q4_K|q5_K --out FILE.gguf|DIR [--seed S]\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    llm_args a = { argc - 2, argv + 2 };
    const char *cmd = argv[1];
    if (strcmp(cmd, "generate") == 0)
        return cli_generate(&a);
    if (strcmp(cmd, "embed") == 0)
        return cli_embed(&a);
    if (strcmp(cmd, "tokenize") == 0)
        return cli_tokenize(&a);
    if (strcmp(cmd, "info") == 0)
        return cli_info(&a);
    if (strcmp(cmd, "serve") == 0)
        return cli_serve(&a);
    if (strcmp(cmd, "gen-model") == 0)
        return cli_gen_model(&a);
    fprintf(stderr, "error: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
