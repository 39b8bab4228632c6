"""Request traces as workloads: a recorded stream of real traffic replayed through vLLM's own
scheduler on the simulated clock (`--trace FILE`).

One module per public format reads it as a stream of `TraceRow`s, one per request, each
naming its line in the file (the request's id in the run, so a request seen in the decisions
table can be found in the user's own file):

    mooncake.py    Mooncake (FAST'25) JSONL: timestamp (ms), input_length, output_length,
                   hash_ids (one id per 512-token block of the prompt)
    azure.py       Azure LLM inference traces CSV: TIMESTAMP (a wall date-time),
                   ContextTokens, GeneratedTokens
    burstgpt.py    BurstGPT CSV: Timestamp (s), Request tokens, Response tokens (the columns
                   are found by name, so the variant with Session ID and Elapsed time reads too)
    vllm_bench.py  `vllm bench serve --save-result --save-detailed` JSON: input_lens,
                   output_lens, start_times

detect.py tells the format from the file's first bytes, source.py checks each row (line
numbers, negative lengths, time going backwards, prompts longer than the model's context),
slices and paces the stream, prompts.py makes each row's prompt tokens (Mooncake's hash_ids
become shared blocks), and stats.py is what a run reports about the trace it read.

Why streamed: a trace of a million requests must start running in about a second, in flat
memory; only the vllm-bench JSON (one object, thousands of requests) is read whole.
"""
