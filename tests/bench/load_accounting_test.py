#!/usr/bin/env python3
"""bench/load.py's accounting on hand-made stream records: a response id the server gave two
requests, a chunk of another stream inside a stream, more chunks than the server's usage count,
an ignore_eos stream cut short by the server's own count, and a stream of our server without its
usage chunk or without response ids (nothing to check it by) are all caught; clean records are
not. (Session 2's check counted duplicates among the client's own loop indices: always 0.) And its
greedy comparison with llama.cpp's answers: up to vigil's end-of-generation token, not past it."""
import unittest

import load


def record(req_id, response_id, chunks=4, usage=4, max_tokens=4, done=True):
    return {'id': req_id, 'sent': 0.0, 'tokens': [0.1 * (i + 1) for i in range(chunks)], 'done': done,
            'status': 200, 'response_ids': [response_id] * (chunks + 1), 'usage_tokens': usage,
            'max_tokens': max_tokens, 'end': 1.0}


class Accounting(unittest.TestCase):
    def test_clean_streams(self):
        s = load.summarize([record(0, 'cmpl-a'), record(1, 'cmpl-b')], 1.0)
        self.assertEqual((s['lost'], s['duplicated']), (0, 0))

    def test_one_response_id_for_two_requests(self):
        s = load.summarize([record(0, 'cmpl-a'), record(1, 'cmpl-a')], 1.0)
        self.assertEqual(s['duplicated'], 2)

    def test_a_chunk_of_another_stream(self):
        mixed = record(0, 'cmpl-a')
        mixed['response_ids'][2] = 'cmpl-b'
        self.assertEqual(load.summarize([mixed, record(1, 'cmpl-b')], 1.0)['duplicated'], 2)

    def test_more_chunks_than_tokens_generated(self):
        self.assertEqual(load.summarize([record(0, 'cmpl-a', chunks=5, usage=4)], 1.0)['duplicated'], 1)

    def test_ignore_eos_stream_short_of_max_tokens_is_lost(self):
        s = load.summarize([record(0, 'cmpl-a', chunks=3, usage=3, max_tokens=4)], 1.0)
        self.assertEqual(s['lost'], 1)

    def test_stream_without_done_is_lost(self):
        self.assertEqual(load.summarize([record(0, 'cmpl-a', done=False)], 1.0)['lost'], 1)

    def test_stream_without_usage_is_lost(self):
        self.assertEqual(load.summarize([record(0, 'cmpl-a', usage=None), record(1, 'cmpl-b')], 1.0)['lost'], 1)

    def test_stream_without_response_ids_is_lost(self):
        bare = record(0, 'cmpl-a')
        bare['response_ids'] = []
        self.assertEqual(load.summarize([bare, record(1, 'cmpl-b')], 1.0)['lost'], 1)

    def test_end_to_end_counts_finished_streams_only(self):
        # Sent at 0, ended at 1.0 and 3.0; the unfinished one (ended at 9.0) is not a latency.
        late = record(1, 'cmpl-b')
        late['end'] = 3.0
        cut = record(2, 'cmpl-c', done=False)
        cut['end'] = 9.0
        s = load.summarize([record(0, 'cmpl-a'), late, cut], 1.0)
        self.assertEqual((s['e2e_p50'], s['e2e_p99'], s['ttft_max']), (3.0, 3.0, 0.1))

    def test_other_servers_may_omit_usage(self):
        # llama.cpp's server in the comparison: not held to our server's usage chunk.
        self.assertEqual(load.summarize([record(0, 'cmpl-a', usage=None)], 1.0, own=False)['lost'], 0)


class GreedyAnswers(unittest.TestCase):
    def test_identical_and_different_answers(self):
        c = load.compare_answers({0: ' the cat sat', 1: ' a dog ran'}, {0: ' the cat sat', 1: ' a dog sat'}, True)
        self.assertEqual((c['identical'], c['differ']), (1, 1))
        self.assertEqual((c['first_differences'][0]['id'], c['first_differences'][0]['at_char']), (1, 7))

    def test_compared_up_to_the_end_of_generation_token(self):
        # llama.cpp never picks the token ignore_eos masks: after it the answers part by design.
        got = {0: ' the end<|im_end|> more', 1: ' one<|endoftext|>x'}
        c = load.compare_answers(got, {0: ' the end, and then', 1: ' one two'}, True)
        self.assertEqual((c['identical'], c['compared_to_eog']), (2, 2))

    def test_a_difference_before_the_end_of_generation_token_counts(self):
        c = load.compare_answers({0: ' the fox<|im_end|>'}, {0: ' the end'}, True)
        self.assertEqual(c['differ'], 1)

    def test_the_peer_against_itself_is_compared_whole(self):
        c = load.compare_answers({0: ' one<|im_end|>x'}, {0: ' one<|im_end|>y'}, False)
        self.assertEqual(c['differ'], 1)


if __name__ == '__main__':
    unittest.main()
