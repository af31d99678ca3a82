"""Issue 61's lever: the response's mutual information with its context (full_metric.research.response_pmi). The
weight is chosen by hand-counted pair accuracies; the log-likelihood is checked against the model's logits summed
by hand over the response's tokens of the whole rendered conversation (one forward pass of the full text)."""

from __future__ import annotations

import pytest
import torch

from full_metric import FullScorer
from full_metric.errors import UsageError
from full_metric.research.response_pmi import choose_weight, response_log_likelihood, response_pmi

#: A template whose turn header ends in a line break, as real ones do (ChatML, Llama-3, Gemma): the response's
#: text starts a token of its own, so the whole conversation tokenises as its parts do
TEMPLATE = ("{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
            "{% if add_generation_prompt %}<s>assistant\n{% endif %}")


def test_the_weight_is_the_one_that_ranks_the_most_pairs_right_ties_to_the_smaller():
    full = [1.0, -1.0, -2.0, 0.5]
    pmi = [0.0, 2.0, 3.0, -1.0]
    # w=0: pairs 0, 3 right (2 of 4); w=1: 1.0, 1.0, 1.0, -0.5 -> 3; w=2: 1.0, 3.0, 4.0, -1.5 -> 3 (a tie: w=1)
    best, accuracy = choose_weight(full, pmi, (0.0, 1.0, 2.0))
    assert best == 1.0 and accuracy == {0.0: 0.5, 1.0: 0.75, 2.0: 0.75}
    with pytest.raises(UsageError):
        choose_weight([], [], (0.0,))


def test_the_response_log_likelihood_is_the_sum_over_its_tokens_in_the_whole_conversation(tiny_models, tokenizer):
    tok = tokenizer.__class__.from_pretrained(tokenizer.name_or_path)
    tok.chat_template = TEMPLATE
    scorer = FullScorer(tiny_models["llama"], tokenizer=tok, device="cpu", progress=False, rendering="chat_template")
    context, response = ["Hi there!", "How was your weekend?"], "Great, I went hiking."
    messages = [{"role": "assistant", "content": "Hi there!"}, {"role": "user", "content": "How was your weekend?"}]
    head = tok.apply_chat_template(messages, tokenize=False) + "<s>assistant\n"
    text = head + response + "</s>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    start = len(tok(head, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        logits = tiny_models["llama"](torch.tensor([ids])).logits[0].log_softmax(-1)
    by_hand = sum(float(logits[k - 1, ids[k]]) for k in range(start, len(ids)))
    assert response_log_likelihood(scorer, context, response) == pytest.approx(by_hand, abs=1e-4)
    alone = response_log_likelihood(scorer, [], response)
    assert response_pmi(scorer, [context], [response]) == pytest.approx([by_hand - alone], abs=1e-4)


def test_a_judge_read_otherwise_than_through_a_chat_template_is_refused_by_name(tiny_blenderbot_path):
    with pytest.raises(UsageError, match="tiny-blenderbot is read with the 'blenderbot' rendering"):
        response_pmi(FullScorer(str(tiny_blenderbot_path), progress=False), [["Hi!"]], ["Hello."])
