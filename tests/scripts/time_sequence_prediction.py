"""pytorch/examples time_sequence_prediction, reduced: two LSTM cells learn sine waves with
LBFGS, then predict the continuation."""
import argparse

import numpy as np

import cltensor as torch
import cltensor.nn as nn
import cltensor.optim as optim


class Sequence(nn.Module):
    def __init__(self, hidden=12):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        n = input.size(0)
        h_t = torch.zeros(n, self.hidden, dtype=input.dtype, device=input.device)
        c_t = torch.zeros(n, self.hidden, dtype=input.dtype, device=input.device)
        h_t2 = torch.zeros(n, self.hidden, dtype=input.dtype, device=input.device)
        c_t2 = torch.zeros(n, self.hidden, dtype=input.dtype, device=input.device)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # then feed the predictions back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def build_model():
    torch.manual_seed(0)
    return Sequence()


def sine_data(n=6, length=24, period=8.0):
    rng = np.random.default_rng(2)
    x = np.arange(length) + rng.integers(-4 * period, 4 * period, n)[:, None]
    return np.sin(x / period).astype(np.float32)


def train(seq, device, steps):
    data = sine_data()
    input = torch.from_numpy(data[2:, :-1]).to(device)
    target = torch.from_numpy(data[2:, 1:]).to(device)
    test_input = torch.from_numpy(data[:2, :-1]).to(device)
    test_target = torch.from_numpy(data[:2, 1:]).to(device)
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    losses = []
    for i in range(steps):
        print(f"step {i}")

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print(f"  closure loss {loss.item():.6f}")
            loss.backward()
            return loss
        losses.append(optimizer.step(closure).item())
        with torch.no_grad():  # forecasting: no gradients
            future = 4
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print(f"forecast loss {loss.item():.6f}")
            y = pred.detach().numpy()
            assert y.shape == (2, test_input.size(1) + future)
    return losses


def main(argv=()):
    parser = argparse.ArgumentParser(description="time sequence prediction, reduced")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--save-dir", default=".")
    args = parser.parse_args(list(argv))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return train(build_model().to(device), device, args.steps)


if __name__ == "__main__":
    main()
