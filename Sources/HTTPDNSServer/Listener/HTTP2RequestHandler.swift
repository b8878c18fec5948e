// HTTPListener's HTTP/2 connections: after NIOHTTP2Handler (no stream multiplexer), reads every stream's
// frames, lets `HTTP2Requests` decide, and writes the answers as frames on the connection. See
// HTTP2Requests.swift for why and for the rules.

import HTTPDNSCore
import HTTPDNSEngine
import HTTPDNSListener
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

final class HTTP2RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let context: ConnectionContext
    private var requests: HTTP2Requests
    /// The timers of requests still arriving, by stream.
    private var timers: [HTTP2StreamID: Scheduled<Void>] = [:]
    /// Answers written and waiting to go out, since their last progress (written, or the client opened
    /// a window since): one timer for all of them (`sendTimer`), re-armed for the earliest, since nearly
    /// every answer goes out in the write that made it and a timer per answer cost a schedule and a
    /// cancel on the event loop each. As nginx's `send_timeout`, it times the gap between two moves, not
    /// the whole answer: a steady slow reader is not cut.
    private var sendingSince: [HTTP2StreamID: NIODeadline] = [:]
    private var sendTimer: Scheduled<Void>?
    private var channelContext: ChannelHandlerContext?
    /// Inside a read: flushes wait for its end, so the answers to one read go out in one write.
    private var reading = false
    private var flushPending = false
    /// The answers being made by the async handler, by stream: cancelled when their stream goes.
    private var answerTasks: [HTTP2StreamID: Task<Void, Never>] = [:]
    /// What the listener was last told this connection does (ConnectionSlots): busy and sending
    /// connections are not closed for a newcomer, idle ones may be.
    private var reported = ConnectionSlots<ObjectIdentifier>.Use.idle
    /// Since when no stream has been open (nil while one is): the connection closes once that is
    /// idleTimeout ago, whatever else the client sends (PINGs, SETTINGS, WINDOW_UPDATEs do not keep it
    /// open). One timer, re-armed for the time left when it fires early: a timer per request cost a
    /// schedule and a cancel on the event loop for every answer.
    private var idleSince: NIODeadline?
    private var idleTimer: Scheduled<Void>?
    private let idleTimeout: TimeAmount
    /// `limits.requestTimeout`, converted once.
    private let requestTimeout: TimeAmount

    init(context: ConnectionContext) {
        self.context = context
        self.requests = HTTP2Requests(maxRequestBytes: context.limits.maxRequestBytes)
        self.idleTimeout = TimeAmount(context.limits.idleTimeout)
        self.requestTimeout = TimeAmount(context.limits.requestTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        channelContext = context
        noteStreams()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        for timer in timers.values { timer.cancel() }
        timers = [:]
        sendTimer?.cancel()
        sendTimer = nil
        sendingSince = [:]
        idleTimer?.cancel()
        idleTimer = nil
        for task in answerTasks.values { task.cancel() }
        answerTasks = [:]
        channelContext = nil
    }

    /// Tells the listener what this connection does (a stream arriving or being answered: busy; only
    /// answers held back by the client's window: sending), and runs the idle timer while no stream is open
    /// at all.
    private func noteStreams() {
        report(requests.hasRequestInProgress ? .busy : sendingSince.isEmpty ? .idle : .sending)
        if !requests.streams.isEmpty {
            idleSince = nil
        } else if idleSince == nil, let channelContext {
            idleSince = channelContext.eventLoop.now
            if idleTimer == nil { armIdleTimer(after: idleTimeout, on: channelContext.eventLoop) }
        }
    }

    private func report(_ use: ConnectionSlots<ObjectIdentifier>.Use) {
        guard use != reported else { return }
        reported = use
        switch use {
        case .busy: context.slot.busy()
        case .sending: context.slot.sending()
        case .idle: context.slot.idle()
        }
    }

    /// The client opened a window (the connection's, or a stream's): the answers it holds back may move
    /// on, so their send timers start again.
    private func windowOpened(_ stream: HTTP2StreamID, now: NIODeadline) {
        if stream == .rootStream {
            for id in sendingSince.keys { sendingSince[id] = now }
        } else if sendingSince[stream] != nil {
            sendingSince[stream] = now
        } else {
            return
        }
        context.slot.progress()
    }

    private func armSendTimer(after delay: TimeAmount, context: ChannelHandlerContext) {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        sendTimer = context.eventLoop.scheduleTask(in: delay) { bound.value.sendTimerFired() }
    }

    /// Resets the streams whose answer has waited requestTimeout to go out, and runs again for the
    /// earliest of the others.
    private func sendTimerFired() {
        sendTimer = nil
        guard let context = channelContext else { return }
        let now = context.eventLoop.now
        var next: TimeAmount?
        for (id, since) in sendingSince {
            let left = requestTimeout - (now - since)
            guard left <= .zero else {
                next = min(next ?? left, left)
                continue
            }
            sendingSince[id] = nil
            for action in requests.timerFired(id) { perform(action, context: context) }
        }
        noteStreams()
        if let next, sendTimer == nil { armSendTimer(after: next, context: context) }
    }

    private func armIdleTimer(after delay: TimeAmount, on loop: any EventLoop) {
        let bound = NIOLoopBound(self, eventLoop: loop)
        idleTimer = loop.scheduleTask(in: delay) { bound.value.idleTimerFired() }
    }

    /// Closes the connection if no stream has been open for the whole idle timeout; otherwise the timer
    /// runs again for the time left, or (a stream is open) the next idle moment arms it.
    private func idleTimerFired() {
        idleTimer = nil
        guard let since = idleSince, let context = channelContext else { return }
        let idleFor = context.eventLoop.now - since
        guard idleFor >= idleTimeout else {
            armIdleTimer(after: idleTimeout - idleFor, on: context.eventLoop)
            return
        }
        self.context.logger.debug("connection closed: no stream for the idle timeout")
        perform(.goAway(lastStreamID: requests.lastStreamID), context: context)
        perform(.close, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        reading = true
        let frame = unwrapInboundIn(data)
        let actions: [HTTP2Requests.Action]
        switch frame.payload {
        case .headers(let headers):
            actions = requests.headers(frame.streamID, headers.headers, endStream: headers.endStream)
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return }
            let padding = data.paddingBytes.map { $0 + 1 } ?? 0
            actions = requests.data(
                frame.streamID,
                bytes,
                flowControlledBytes: bytes.readableBytes + padding,
                endStream: data.endStream
            )
        case .rstStream:
            streamGone(frame.streamID)
            return
        case .windowUpdate where frame.streamID == .rootStream:
            if !sendingSince.isEmpty { windowOpened(.rootStream, now: context.eventLoop.now) }
            // On to HTTP2ConnectionErrorCloser, next, which counts a flood of tiny ones.
            context.fireChannelRead(data)
            return
        case .windowUpdate:
            if !sendingSince.isEmpty { windowOpened(frame.streamID, now: context.eventLoop.now) }
            return
        default:
            // SETTINGS, PING, GOAWAY…: NIOHTTP2Handler has dealt with them.
            return
        }
        for action in actions { perform(action, context: context) }
        noteStreams()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        if flushPending {
            flushPending = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    private func flush(_ context: ChannelHandlerContext) {
        if reading { flushPending = true } else { context.flush() }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent { streamGone(closed.streamID) }
        if event is ChannelShouldQuiesceEvent {
            for action in requests.drain() { perform(action, context: context) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.context.logger.debug("connection error", metadata: ["error": "\(error)"])
        context.fireErrorCaught(error)  // HTTP2ConnectionErrorCloser, next, closes the connection
    }

    private func streamGone(_ id: HTTP2StreamID) {
        // (Each table is looked at only when it holds something: a DoH GET's stream has no timer.)
        if !timers.isEmpty { timers.removeValue(forKey: id)?.cancel() }
        if !sendingSince.isEmpty { sendingSince[id] = nil }
        // Reset by the client (or closed): its answer, and the upstream lookup behind it, are not waited for.
        answerTasks.removeValue(forKey: id)?.cancel()
        guard let context = channelContext else { return }
        for action in requests.closed(id) { perform(action, context: context) }
        noteStreams()
    }

    private func perform(_ action: HTTP2Requests.Action, context: ChannelHandlerContext) {
        switch action {
        case .startTimer(let id) where requests.request(id)?.phase == .sending:
            if !timers.isEmpty { timers.removeValue(forKey: id)?.cancel() }
            sendingSince[id] = context.eventLoop.now
            if sendTimer == nil {
                armSendTimer(after: requestTimeout, context: context)
            }
        case .startTimer(let id):
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            timers[id]?.cancel()
            timers[id] = context.eventLoop.scheduleTask(
                in: requestTimeout
            ) {
                let (me, context) = bound.value
                me.timers[id] = nil
                for action in me.requests.timerFired(id) { me.perform(action, context: context) }
                me.noteStreams()
            }
        case .answer(let id):
            // Carrying a request: its client is using the connection, even when the answer is written and
            // sent within this read (a hosts answer) and it is idle again before the read ends.
            report(.busy)
            if !timers.isEmpty { timers.removeValue(forKey: id)?.cancel() }
            guard let stream = requests.request(id) else { return }
            answer(id, stream, context: context)
        case .refuseTooLarge(let id):
            timers.removeValue(forKey: id)?.cancel()
            let limit = self.context.limits.maxRequestBytes
            write(
                ListenerResponse(status: .payloadTooLarge, text: "request body larger than \(limit) bytes"),
                head: false,
                on: id,
                context: context
            )
            reset(id, .noError, context: context)
        case .openWindows(let bytes, let stream):
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: bytes))),
                promise: nil
            )
            if let stream {
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .windowUpdate(windowSizeIncrement: bytes))),
                    promise: nil
                )
            }
            flush(context)
        case .reset(let id, let code):
            reset(id, code, context: context)
        case .goAway(let last):
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(
                        streamID: .rootStream,
                        payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil)
                    )
                ),
                promise: nil
            )
            flush(context)
        case .close:
            // Not here and now: the last stream's end is reported while its final frame is still being
            // written through NIOHTTP2Handler, and closing inside that write would drop the frame. On the
            // next turn of the loop the answer has been written and flushed.
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.execute {
                bound.value.flush()
                bound.value.close(promise: nil)
            }
        }
    }

    private func answer(_ id: HTTP2StreamID, _ stream: HTTP2Requests.Stream, context: ChannelHandlerContext) {
        let request = stream.listenerRequest(
            isTLS: self.context.isTLS,
            remote: self.context.remote,
            remoteIP: self.context.remoteIP
        )
        let head = request.method == .HEAD
        if let immediate = self.context.immediate, let response = immediate(request) {
            log(request, response)
            write(response, head: head, on: id, context: context)
            for action in requests.answerWritten(id) { perform(action, context: context) }
            return
        }
        let handler = self.context.handler
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let answered = context.eventLoop.makePromise(of: ListenerResponse.self)
        answerTasks[id] = Task { answered.succeed(await handler(request)) }
        answered.futureResult.whenSuccess { response in
            let (me, context) = bound.value
            me.answerTasks[id] = nil
            // Reset or closed while it was being answered: nobody to answer.
            guard me.requests.request(id) != nil, me.channelContext != nil else { return }
            me.log(request, response)
            me.write(response, head: head, on: id, context: context)
            for action in me.requests.answerWritten(id) { me.perform(action, context: context) }
            me.noteStreams()
        }
    }

    private func log(_ request: ListenerRequest, _ response: ListenerResponse) {
        context.logger.debug(
            "request",
            metadata: [
                "method": "\(request.method)", "uri": "\(redactingSecrets(request.uri))",
                "status": "\(response.status.code)", "version": "h2",
            ]
        )
    }

    /// HEADERS, then the body in one DATA frame that ends the stream; an empty body (or a HEAD
    /// request's) ends the stream on the HEADERS frame: no empty DATA frame, which NIO's clients count
    /// as a flood when two arrive in a row.
    private func write(_ response: ListenerResponse, head: Bool, on id: HTTP2StreamID, context: ChannelHandlerContext) {
        // Sized once: growing the list field by field was three allocations an answer.
        var headers = HPACKHeaders()
        headers.reserveCapacity(response.headers.count + 2)
        headers.add(name: ":status", value: String(response.status.code))
        for (name, value) in response.headers {
            let name = name.lowercased()
            switch name {
            // Connection-specific fields are not allowed in HTTP/2 (RFC 9113 §8.2.2).
            case "connection", "keep-alive", "transfer-encoding", "upgrade", "content-length": continue
            default: headers.add(name: name, value: value)
            }
        }
        headers.add(name: "content-length", value: String(response.body.readableBytes))
        let bodyFollows = !head && response.body.readableBytes > 0
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !bodyFollows)))
            ),
            promise: nil
        )
        if bodyFollows {
            context.write(
                wrapOutboundOut(
                    HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(response.body), endStream: true)))
                ),
                promise: nil
            )
        }
        flush(context)
    }

    private func reset(_ id: HTTP2StreamID, _ code: HTTP2ErrorCode, context: ChannelHandlerContext) {
        streamGone(id)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(code))), promise: nil)
        flush(context)
    }
}
