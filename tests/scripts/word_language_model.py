"""pytorch/examples word_language_model, reduced: an LSTM language model on a tiny generated
corpus, truncated backpropagation through time, gradient clipping and a hand-written SGD step."""
import argparse
import math
import os
import time

import cltensor as torch
import cltensor.nn as nn
import cltensor.nn.functional as F


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """Sentences of a tiny repeating grammar in place of the Wikitext-2 files."""

    def __init__(self):
        self.dictionary = Dictionary()
        words = ("the cat sat on the mat <eos> a dog ran to the cat <eos> " * 12).split()
        ids = [self.dictionary.add_word(w) for w in words]
        self.train = torch.tensor(ids[:96], dtype=torch.int64)
        self.valid = torch.tensor(ids[96:], dtype=torch.int64)


class RNNModel(nn.Module):
    """Embedding, a stacked RNN and a linear layer back to the vocabulary (tied weights)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.2, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def repackage_hidden(h):
    """The hidden state cut from the graph of the batches before (truncated BPTT)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, data_source, bptt, criterion, ntokens):
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(data_source.size(1))
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def main(argv=()):
    parser = argparse.ArgumentParser(description="word language model, reduced")
    parser.add_argument("--model", default="LSTM")
    parser.add_argument("--lr", type=float, default=20.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--bptt", type=int, default=8)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    torch.manual_seed(1111)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    corpus = Corpus()
    train_data = batchify(corpus.train, 4, device)
    val_data = batchify(corpus.valid, 2, device)
    ntokens = len(corpus.dictionary)
    model = RNNModel(args.model, ntokens, 16, 16, 2, 0.2, tie_weights=True).to(device)
    criterion = nn.NLLLoss()
    lr, best_val_loss, losses = args.lr, None, []
    path = os.path.join(args.save_dir, "model.pt")
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        model.train()
        hidden = model.init_hidden(4)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            if batch % 2 == 0:
                print(f"epoch {epoch}, batch {batch}: lr {lr:.2f}, loss {loss.item():5.2f}, "
                      f"perplexity {math.exp(loss.item()):8.2f}")
        val_loss = evaluate(model, val_data, args.bptt, criterion, ntokens)
        losses.append(val_loss)
        print(f"epoch {epoch} took {time.time() - epoch_start_time:5.2f}s: validation loss "
              f"{val_loss:5.2f}, perplexity {math.exp(val_loss):8.2f}")
        if not best_val_loss or val_loss < best_val_loss:
            torch.save({"model": model.state_dict(), "epoch": epoch, "lr": lr}, path)
            best_val_loss = val_loss
        else:
            lr /= 4.0
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    model.rnn.flatten_parameters()
    print(f"best epoch {checkpoint['epoch']}, lr {checkpoint['lr']}")
    return losses


if __name__ == "__main__":
    main()
