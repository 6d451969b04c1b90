fn main() {
    println!("capstan-bench: not written yet");
}
